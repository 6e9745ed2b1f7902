#!/usr/bin/env bash
# Installs, as root, the Debian packages the interop tests drive: the Linux
# programs nagare is tested and benchmarked against (iperf3 and sockperf:
# the Linux veth peers of `nagare bench vni`; ApacheBench for the HTTP
# server; hping3 for the SYN flood; radvd, the router advertising a prefix
# to nagare's address autoconfiguration; the programs `nagare run` is tested
# with: wget, socat, nginx, redis, ssh and sshd). Without root it says
# what is missing; the tests that need it then report SKIPPED with the
# reason.
set -euo pipefail

declare -A package_of=(
    [ip]=iproute2
    [ping]=iputils-ping
    [nc]=netcat-openbsd
    [tshark]=tshark
    [python3]=python3
    [curl]=curl
    [ss]=iproute2
    [tc]=iproute2
    [sha256sum]=coreutils
    [nft]=nftables
    [iperf3]=iperf3
    [sockperf]=sockperf
    [ab]=apache2-utils
    [hping3]=hping3
    [timeout]=coreutils
    [wget]=wget
    [socat]=socat
    [nginx]=nginx
    [redis-server]=redis-server
    [redis-cli]=redis-tools
    [redis-benchmark]=redis-tools
    [ssh]=openssh-client
    [scp]=openssh-client
    [ssh-keygen]=openssh-client
    [/usr/sbin/sshd]=openssh-server
    [radvd]=radvd
)

missing=()
for tool in "${!package_of[@]}"; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("${package_of[$tool]}")
done

if [ ${#missing[@]} -eq 0 ]; then
    echo "test dependencies: all present"
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "test dependencies: missing ${missing[*]}; not root, so not installing (interop tests will be SKIPPED)" >&2
    exit 0
fi

echo "test dependencies: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "test dependencies: installed"
