//! How netd starts its driver: as a process (split placement) or a thread
//! (single placement), and what the driver process does when it starts.
//!
//! A driver process is a program run with `driver` and the arguments
//! [`DriverSpec::args`] writes (the `nagare` command's hidden `driver`
//! subcommand parses them into [`DriverArgs`] and calls [`run_process`]).
//! It inherits one descriptor, its control socket, named by
//! `--control-fd`; a TAP's descriptor comes over that socket in netd's
//! hello, a VNI port the driver attaches itself.

use super::{serve, DriverHandle, Launcher, Placement};
use nagare_dev::{Device, Impaired, Impairment, TapDevice};
use nagare_host::link::open_vni_port;
use nagare_wire::EthernetAddress;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// The device a driver opens.
#[derive(Clone, Debug)]
pub enum DriverDevice {
    /// The TAP netd opened (its descriptor comes with netd's hello).
    Tap {
        /// Its name.
        name: String,
        /// It was attached with virtio-net headers.
        vnet_header: bool,
    },
    /// A port of a VNI segment, attached by the driver.
    Vni {
        /// The segment.
        segment: String,
        /// The port's Ethernet address (netd's).
        mac: EthernetAddress,
    },
}

/// What the driver opens, and how it impairs traffic.
#[derive(Clone, Debug)]
pub struct DriverSpec {
    /// The device.
    pub device: DriverDevice,
    /// Loss, delay and the like both ways (tests).
    pub impair: Option<Impairment>,
    /// Seeds the impairment (netd's [`LinkSpec::host_id`](nagare_host::LinkSpec::host_id)).
    pub seed: u64,
    /// How long the driver polls after its last work before it sleeps.
    pub spin: Duration,
}

impl DriverSpec {
    /// The driver process's arguments after `driver` for this device.
    pub fn args(&self) -> Vec<String> {
        let mut a = match &self.device {
            DriverDevice::Tap { name, vnet_header } => {
                let mut a = vec![String::from("--tap"), name.clone()];
                if *vnet_header {
                    a.push(String::from("--vnet-header"));
                }
                a
            }
            DriverDevice::Vni { segment, mac } => {
                vec![String::from("--vni"), segment.clone(), String::from("--mac"), mac.to_string()]
            }
        };
        a.extend([String::from("--seed"), self.seed.to_string()]);
        a.extend([String::from("--spin-us"), self.spin.as_micros().to_string()]);
        if let Some(i) = &self.impair {
            a.extend([String::from("--impair"), i.to_string()]);
        }
        a
    }

    /// Opens the device (`fd`: the TAP's, from netd's hello).
    fn open(&self, fd: Option<OwnedFd>) -> io::Result<Box<dyn Device>> {
        let mut device: Box<dyn Device> = match &self.device {
            DriverDevice::Tap { name, vnet_header } => {
                let fd =
                    fd.ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "netd passed no TAP descriptor"))?;
                Box::new(TapDevice::from_fd(fd, name, *vnet_header)?)
            }
            DriverDevice::Vni { segment, mac } => Box::new(open_vni_port(segment, *mac)?),
        };
        if let Some(i) = self.impair.filter(|i| !i.is_none()) {
            device = Box::new(Impaired::new(device, i, self.seed));
        }
        Ok(device)
    }
}

/// How netd starts its driver in `placement`: `program` (run as `program
/// driver ARGS`) for split, a thread for single; inline has none.
pub fn launcher(placement: Placement, spec: DriverSpec, program: PathBuf) -> io::Result<Launcher> {
    match placement {
        Placement::Split => Ok(Box::new(move |control: OwnedFd| {
            // The child inherits one descriptor: a duplicate without
            // close-on-exec, closed here once it has been passed on.
            // SAFETY: F_DUPFD on a descriptor we own returns a new one.
            let fd = unsafe { libc::fcntl(control.as_raw_fd(), libc::F_DUPFD, 3) };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: `fd` was just created and is owned by nobody else.
            let inherited = unsafe { OwnedFd::from_raw_fd(fd) };
            let child = std::process::Command::new(&program)
                .arg("driver")
                .arg("--control-fd")
                .arg(fd.to_string())
                .args(spec.args())
                .spawn();
            drop(inherited);
            drop(control);
            Ok(DriverHandle::Process(child?))
        })),
        Placement::Single => Ok(Box::new(move |control: OwnedFd| {
            let spec = spec.clone();
            let thread = std::thread::Builder::new().name(String::from("nagare-driver")).spawn(move || {
                let stop = AtomicBool::new(false);
                if let Err(e) = serve(control, spec.spin, |fd| spec.open(fd), &stop) {
                    log::error!("driver thread: {e}");
                }
            })?;
            Ok(DriverHandle::Thread(thread))
        })),
        Placement::Inline => Err(io::Error::new(io::ErrorKind::InvalidInput, "inline placement has no driver")),
    }
}

/// The driver process's arguments, as [`DriverSpec::args`] writes them.
#[derive(Debug, Clone)]
pub struct DriverArgs {
    /// The inherited control socket netd started the driver with.
    pub control_fd: i32,
    /// The TAP netd opened (its descriptor comes over the control socket).
    pub tap: Option<String>,
    /// The TAP was attached with virtio-net headers.
    pub vnet_header: bool,
    /// A VNI segment to attach a port of.
    pub vni: Option<String>,
    /// The port's Ethernet address (netd's), needed with `vni`.
    pub mac: Option<EthernetAddress>,
    /// Seeds the impairment (netd's host identity).
    pub seed: u64,
    /// Impair traffic both ways (as netd was asked to).
    pub impair: Option<Impairment>,
    /// How long to poll after the last work before sleeping.
    pub spin: Duration,
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

/// Runs this process as netd's driver until netd closes the control
/// socket.
pub fn run_process(args: DriverArgs) -> io::Result<()> {
    if args.control_fd < 3 {
        return Err(invalid(format!("--control-fd {} is not an inherited descriptor", args.control_fd)));
    }
    // SAFETY: fstat on a descriptor number into a local struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::fstat(args.control_fd, &mut st) } < 0 || st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
        return Err(invalid(format!(
            "--control-fd {} is not a socket (the driver is started by netd)",
            args.control_fd
        )));
    }
    // SAFETY: netd passed us this descriptor for us alone; checked open.
    let control = unsafe { OwnedFd::from_raw_fd(args.control_fd) };
    // SAFETY: F_SETFD with a constant flag on our descriptor.
    unsafe { libc::fcntl(control.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) };
    // Ctrl-C in a terminal reaches the whole process group: netd stops us
    // by closing the control socket, after it has stopped itself.
    // SAFETY: setting a signal to be ignored installs no handler.
    unsafe { libc::signal(libc::SIGINT, libc::SIG_IGN) };
    let device = match (args.tap, args.vni) {
        (Some(name), _) => DriverDevice::Tap { name, vnet_header: args.vnet_header },
        (None, Some(segment)) => {
            let mac = args.mac.ok_or_else(|| invalid("--vni needs --mac (netd's Ethernet address)".into()))?;
            DriverDevice::Vni { segment, mac }
        }
        (None, None) => return Err(invalid("--tap or --vni is needed".into())),
    };
    let spec = DriverSpec { device, impair: args.impair, seed: args.seed, spin: args.spin };
    let stop = AtomicBool::new(false);
    let stats = serve(control, args.spin, |fd| spec.open(fd), &stop)?;
    log::info!("(pid {}) stopping; {stats:?}", std::process::id());
    Ok(())
}
