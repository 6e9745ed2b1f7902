//! libnagare as a C program sees it: the library exports every call that
//! `include/nagare.h` declares, and C programs built against the header
//! and linked with the library move bytes through a netd running in a
//! thread of the test: TCP and UDP (`tests/c/echo.c`), and UDP sockets
//! made before `fork` and used in the child (`tests/c/fork_udp.c`).

#[path = "../../nagare-netd/tests/support/mod.rs"]
mod support;

use nagare_netd::Placement;
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::{NetdThread, Wire, NETD_ADDR};

/// The longest the C program may run.
const RUN_LIMIT: Duration = Duration::from_secs(60);

/// The calls `include/nagare.h` declares (at least this many).
const DECLARED: usize = 28;

fn skip(test: &str, reason: &str) {
    // Straight to the terminal: the harness captures eprintln!, and a skip
    // must be seen even when the test passes.
    let _ = std::io::Write::write_fmt(&mut std::io::stderr(), format_args!("\n*** SKIPPED {test}: {reason} ***\n\n"));
}

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn header() -> PathBuf {
    repository().join("include/nagare.h")
}

/// `libnagare.so` beside this test's binary's folder (`target/<profile>/`,
/// the test being in `target/<profile>/deps/`). `cargo test` does not
/// build it (the library has no Rust crate type for a test to link), so a
/// missing one, or one older than the sources of this crate or
/// `nagare-posix`, fails with the command that builds it.
fn library() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    let profile = exe.parent().and_then(Path::parent).expect("the test binary is in target/<profile>/deps");
    let lib = profile.join("libnagare.so");
    assert!(
        lib.is_file(),
        "{} is missing: build it with `cargo build -p nagare-ffi` (same profile) before this test",
        lib.display()
    );
    let built = lib.metadata().and_then(|m| m.modified()).expect("the library's time");
    for dir in ["crates/nagare-ffi/src", "crates/nagare-posix/src"] {
        for file in std::fs::read_dir(repository().join(dir)).expect("a source folder").flatten() {
            let changed = file.metadata().and_then(|m| m.modified()).expect("a source file's time");
            assert!(
                changed <= built,
                "{} is older than {}: build it again with `cargo build -p nagare-ffi` (same profile)",
                lib.display(),
                file.path().display()
            );
        }
    }
    lib
}

/// The names of the functions the header declares: each `nagare_NAME(`
/// outside a comment.
fn declared(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = text;
    let mut code = String::new();
    // Comments out: `/* ... */` only (the header is C99 without `//`).
    while let Some(start) = rest.find("/*") {
        code.push_str(&rest[..start]);
        rest = rest[start..].find("*/").map_or("", |end| &rest[start + end + 2..]);
    }
    code.push_str(rest);
    for (at, _) in code.match_indices("nagare_") {
        let name: String =
            code[at..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect::<String>();
        if code[at + name.len()..].starts_with('(') && !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

#[test]
fn the_header_finds_its_declarations() {
    let names = declared("/* nagare_not(a comment) */\nint nagare_one(int);\nssize_t nagare_two_2(void *p);\n");
    assert_eq!(names, ["nagare_one", "nagare_two_2"]);
}

#[test]
fn the_library_exports_every_call_the_header_declares() {
    let text = std::fs::read_to_string(header()).expect("include/nagare.h");
    let names = declared(&text);
    assert!(names.len() >= DECLARED, "the header declares {} calls, fewer than {DECLARED}: {names:?}", names.len());
    let lib = library();
    let path = CString::new(lib.as_os_str().as_encoded_bytes()).expect("a path without NUL");
    let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    assert!(!handle.is_null(), "dlopen {} failed", lib.display());
    let missing: Vec<&String> = names
        .iter()
        .filter(|name| {
            let c = CString::new(name.as_str()).expect("a name without NUL");
            unsafe { libc::dlsym(handle, c.as_ptr()) }.is_null()
        })
        .collect();
    assert!(missing.is_empty(), "{} lacks {missing:?}, declared in include/nagare.h", lib.display());
}

/// Builds `tests/c/NAME.c` into `out` with `cc`: None (and SKIPPED said
/// for `test`) when there is no `cc`.
fn build_program(lib: &Path, out: &Path, name: &str, test: &str) -> Option<PathBuf> {
    let program = out.join(name);
    let dir = lib.parent().expect("the library's folder");
    let built = Command::new("cc")
        .arg("-std=c99")
        .arg("-D_GNU_SOURCE")
        .args(["-Wall", "-Wextra", "-Werror"])
        .arg("-I")
        .arg(repository().join("include"))
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/c/{name}.c")))
        .arg("-o")
        .arg(&program)
        .arg("-L")
        .arg(dir)
        .arg("-lnagare")
        .arg(format!("-Wl,-rpath,{}", dir.display()))
        .output();
    match built {
        Err(e) => {
            skip(test, &format!("no C compiler (`cc`: {e})"));
            None
        }
        Ok(o) => {
            assert!(
                o.status.success(),
                "cc failed ({}):\n{}{}",
                o.status,
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
            Some(program)
        }
    }
}

#[test]
fn a_c_program_moves_bytes_through_netd() {
    run_c_program("echo", "a_c_program_moves_bytes_through_netd");
}

/// A forking UDP server's sockets: made and used before `fork`, each
/// receives and sends in the child, byte for byte, and stays the parent's
/// after the child is gone.
#[test]
fn a_c_program_uses_its_udp_sockets_in_a_child_after_fork() {
    run_c_program("fork_udp", "a_c_program_uses_its_udp_sockets_in_a_child_after_fork");
}

/// Builds `tests/c/NAME.c` and runs it against a netd in a thread, with
/// netd's address as its argument: it must exit 0 and say that every
/// byte matched.
fn run_c_program(name: &str, test: &str) {
    let lib = library();
    let out = std::env::temp_dir().join(format!("nagare-ffi-test-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&out).expect("a folder for the program");
    let Some(program) = build_program(&lib, &out, name, test) else {
        let _ = std::fs::remove_dir_all(&out);
        return;
    };
    let netd = NetdThread::start(Placement::Inline, Wire::Loopback);
    let mut child = Command::new(&program)
        .arg(NETD_ADDR.to_string())
        .env(nagare::NETD_ENV, &netd.socket)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the C program starts");
    let deadline = Instant::now() + RUN_LIMIT;
    let status = loop {
        if let Some(s) = child.try_wait().expect("the C program's status") {
            break Some(s);
        }
        if Instant::now() > deadline {
            // Ended by its pid: the child is ours.
            let _ = child.kill();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let output = child.wait_with_output().expect("the C program's output");
    let _ = std::fs::remove_dir_all(&out);
    let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    let Some(status) = status else { panic!("the C program ran past {RUN_LIMIT:?}:\n{said}") };
    assert!(status.success(), "the C program failed ({status}):\n{said}");
    assert!(said.contains("every byte matched"), "the C program did not say it finished:\n{said}");
    assert!(netd.running(), "netd stopped while the program ran");
}
