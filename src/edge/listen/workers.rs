//! The data path's threads: the gateway's listener served by N worker threads, each running its
//! own single-threaded runtime with its own listening socket (`SO_REUSEPORT` on Linux: the
//! kernel spreads new connections over the workers). A connection accepted by a worker is
//! parsed, checked, routed, forwarded and answered on that worker's thread, and the upstream
//! connection it uses belongs to the same thread (`net::HttpClients`), so a call never waits for
//! another thread to wake up. What the workers share (the catalogue snapshot, policy views,
//! limits, the connection and in-flight counts) is read without locks or behind short ones.
//! Work that is not a client's (probing upstreams, stdio children, reloads, background
//! maintenance) stays on the control runtime that started the workers.

use crate::edge::listen::accept_until;
use crate::edge::shared::{Mount, Shared};
use mcpgate_config::ServerConfig;
use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The listening sockets of one address, one per worker.
pub struct Listening {
    addr: SocketAddr,
    sockets: Vec<std::net::TcpListener>,
}

impl Listening {
    /// The address bound (with the port chosen when `listen` asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

/// One worker per core the process may use (at least one).
pub fn default_workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Binds `addr` for `workers` workers. An address another process already listens on is an
/// error, as with a single socket: the port is first claimed by a plain socket (which fails on
/// a port in use, even one bound with `SO_REUSEPORT`), then bound by the workers' sockets.
pub fn bind(addr: SocketAddr, workers: usize) -> std::io::Result<Listening> {
    let workers = workers.max(1);
    let probe = std::net::TcpListener::bind(addr)?;
    let addr = probe.local_addr()?;
    if workers == 1 {
        probe.set_nonblocking(true)?;
        return Ok(Listening { addr, sockets: vec![probe] });
    }
    #[cfg(target_os = "linux")]
    {
        drop(probe);
        let sockets = (0..workers).map(|_| reuseport_socket(addr)).collect::<std::io::Result<Vec<_>>>()?;
        Ok(Listening { addr, sockets })
    }
    #[cfg(not(target_os = "linux"))]
    {
        // Elsewhere `SO_REUSEPORT` does not spread connections: the workers share one socket.
        probe.set_nonblocking(true)?;
        let mut sockets = Vec::with_capacity(workers);
        for _ in 1..workers {
            sockets.push(probe.try_clone()?);
        }
        sockets.push(probe);
        Ok(Listening { addr, sockets })
    }
}

#[cfg(target_os = "linux")]
fn reuseport_socket(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    Ok(socket.into())
}

/// The running workers: [`Workers::stop`] ends their threads, once the control runtime has
/// finished what it ran on them (background tasks started by a request live on its worker).
pub struct Workers {
    exit: CancellationToken,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Workers {
    /// Ends the worker runtimes (what still runs on them is dropped) and waits for their threads.
    pub fn stop(mut self) {
        self.exit.cancel();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        self.exit.cancel();
    }
}

/// Serves `listening` on its workers until `shutdown` completes, then stops accepting and lets
/// the requests in progress finish (for up to `server.drain_timeout`). Returns once every worker
/// has drained; the worker threads keep running until [`Workers::stop`].
pub async fn serve(listening: Listening, mount: Mount, cfg: ServerConfig, shutdown: impl Future<Output = ()>) -> std::io::Result<Workers> {
    let state = Shared::new(listening.addr, mount, cfg)?;
    let stop = CancellationToken::new();
    let exit = CancellationToken::new();
    // Each worker holds a sender until it has drained; the receiver sees the channel close.
    let (drained, mut all_drained) = tokio::sync::mpsc::channel::<()>(1);
    // A worker that cannot start fails the whole; those already started stop with it (both
    // tokens are cancelled when these go out of scope early).
    let mut workers = Workers { exit: exit.clone(), threads: Vec::with_capacity(listening.sockets.len()) };
    let stopping = stop.clone().drop_guard();
    for (i, socket) in listening.sockets.into_iter().enumerate() {
        let (state, stop, exit, drained) = (state.clone(), stop.clone(), exit.clone(), drained.clone());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .thread_name(format!("mcpgate-worker-{i}"))
            .build()
            .map_err(|e| std::io::Error::other(format!("cannot start worker {i}: {e}")))?;
        let thread = std::thread::Builder::new().name(format!("mcpgate-worker-{i}")).spawn(move || {
            runtime.block_on(async move {
                match tokio::net::TcpListener::from_std(socket) {
                    Ok(listener) => accept_until(listener, state, stop).await,
                    Err(e) => tracing::error!(worker = i, error = %e, "a worker cannot listen; the others serve"),
                }
                drop(drained);
                exit.cancelled().await;
            });
            runtime.shutdown_timeout(Duration::from_secs(1));
        })?;
        workers.threads.push(thread);
    }
    drop(drained);
    shutdown.await;
    drop(stopping);
    let _ = all_drained.recv().await;
    state.tasks.stop();
    Ok(workers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_in_use_is_refused_and_port_zero_gives_every_worker_the_same_port() {
        let group = bind("127.0.0.1:0".parse().unwrap(), 3).unwrap();
        assert_eq!(group.sockets.len(), 3);
        let port = group.local_addr().port();
        assert_ne!(port, 0);
        for s in &group.sockets {
            assert_eq!(s.local_addr().unwrap().port(), port);
        }
        let again = bind(group.local_addr(), 2);
        assert!(again.is_err(), "a second gateway on the same port must fail, not share it");
        let single = bind(group.local_addr(), 1);
        assert!(single.is_err());
    }
}
