//! The embedded placement: the engine in the application's own process,
//! behind the same API. [`Embedded::start`] runs an inet server (netd with
//! its device called from its loop) in a thread of this process and
//! connects to it, so `TcpStream`, `TcpListener`, `UdpSocket`, ping sockets,
//! the zero-copy calls and `poll` work unchanged on the [`Session`] it gives.
//! For tests, simulations and the demo; a program that should survive its
//! stack's failure uses a separate `nagare netd` instead.

use crate::Session;
use nagare_core::Interface;
use nagare_dev::{Device, MonotonicClock};
use nagare_netd::NetdConfig;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// An inet server running in this process, and a connection to it.
pub struct Embedded {
    netd: Session,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<io::Result<()>>>,
    socket: PathBuf,
}

impl Embedded {
    /// Starts the server on the engine and device `setup` builds (in the
    /// server's thread: the engine is not `Send`) and connects to it.
    pub fn start<F>(setup: F) -> io::Result<Embedded>
    where
        F: FnOnce() -> io::Result<(Interface, Box<dyn Device>)> + Send + 'static,
    {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let socket = std::env::temp_dir().join(format!("nagare-embedded-{}-{n}.sock", std::process::id()));
        let _ = std::fs::remove_file(&socket);
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread = {
            let stop = Arc::clone(&stop);
            let socket = socket.clone();
            crate::signals::spawn_quiet(
                std::thread::Builder::new().name(String::from("nagare-embedded")),
                move || -> io::Result<()> {
                    let started = (|| {
                        let (iface, device) = setup()?;
                        let config = NetdConfig { socket, link: String::from("embedded"), ..NetdConfig::default() };
                        nagare_netd::Netd::new(iface, device, MonotonicClock::new(), config)
                    })();
                    let mut netd = match started {
                        Ok(n) => {
                            let _ = ready_tx.send(Ok(()));
                            n
                        }
                        Err(e) => {
                            let _ = ready_tx.send(Err(io::Error::new(e.kind(), e.to_string())));
                            return Err(e);
                        }
                    };
                    netd.run(&stop)
                },
            )?
        };
        match ready_rx.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(io::Error::new(io::ErrorKind::TimedOut, "the embedded stack did not start")),
        }
        let netd = match Session::connect(&socket) {
            Ok(n) => n,
            Err(e) => {
                stop.store(true, Ordering::Relaxed);
                let _ = thread.join();
                return Err(e);
            }
        };
        Ok(Embedded { netd, stop, thread: Some(thread), socket })
    }

    /// The connection: pass it to the `_via` constructors.
    pub fn netd(&self) -> &Session {
        &self.netd
    }
}

impl Drop for Embedded {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.socket);
    }
}
