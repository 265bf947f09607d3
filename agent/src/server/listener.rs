//! The listener thread: accepts connections, admits each to a slot (see `slots`) and serves it on a
//! short-lived thread of its own. A panic in the listener is contained and the listener restarted; after
//! a few the agent disables itself and tells each client so.

use std::os::unix::net::UnixListener;
use std::time::Duration;

use asyncdump_protocol::{ErrorKind, Handshake};

use super::connection::connection;
use crate::wire::refuse;
use crate::{containment, slots, sys};

/// How often the listener may fail before the agent disables itself.
const MAX_LISTENER_FAILURES: u32 = 3;

/// Serves `listener` until the process ends. A panic in the listener (a bug) is contained and the
/// listener restarted; after [`MAX_LISTENER_FAILURES`] of them the agent is disabled and tells each
/// client so, on the next connection, rather than vanish.
pub(super) fn supervise(listener: UnixListener, handshake: Handshake) {
    sys::lower_thread_priority();
    for failures in 1..=MAX_LISTENER_FAILURES {
        if containment::contain("the agent's listener", || serve(&listener, &handshake)).is_some() {
            return;
        }
        if failures < MAX_LISTENER_FAILURES {
            containment::log("listener restarted");
        }
    }
    containment::log(&format!(
        "disabled after {MAX_LISTENER_FAILURES} listener failures; clients are told so"
    ));
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
        refuse(
            &mut stream,
            ErrorKind::Internal,
            format!(
                "the agent in process {} is disabled: its listener failed {MAX_LISTENER_FAILURES} times (see the process's stderr); the process itself is unaffected; restart it to re-enable the agent",
                handshake.pid
            ),
        );
    }
}

fn serve(listener: &UnixListener, handshake: &Handshake) {
    for stream in listener.incoming() {
        containment::inject(containment::Site::Accept);
        let stream = match stream {
            Ok(s) => s,
            Err(_) => {
                // Out of file descriptors and the like: back off instead of spinning.
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        slots::paced(|| admit(stream, handshake));
    }
}

/// Admits `stream` to a slot and serves it on a thread of its own, or refuses it.
fn admit(stream: std::os::unix::net::UnixStream, handshake: &Handshake) {
    // Asked once, here: the pid decides the slot, the uid whether the client is served at all.
    let peer = sys::peer(&stream);
    let lease = match slots::admit(peer.as_ref().map_or(0, |&(pid, _)| pid)) {
        Ok(lease) => lease,
        Err(busy) => {
            let mut stream = stream;
            let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
            refuse(&mut stream, ErrorKind::Busy, busy);
            return;
        }
    };
    let handshake = handshake.clone();
    // A thread that cannot start drops the stream and gives the lease back at once.
    let _ = std::thread::Builder::new()
        .name("asyncdump-conn".into())
        .spawn(move || {
            sys::lower_thread_priority();
            containment::contain("a connection", move || {
                connection(stream, peer, &handshake, &lease)
            });
        });
}
