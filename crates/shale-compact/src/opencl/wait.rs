//! Waiting for the device without spinning a host core.
//!
//! `clWaitForEvents` (and every blocking enqueue or `clFinish`) is free to
//! busy-wait, and NVIDIA's runtime does: a host core stays at 100 % for as
//! long as the device works, which is exactly the CPU that offloading
//! compaction is meant to hand back. [`wait_for`] instead asks the runtime
//! to call back when the command is complete (`clSetEventCallback`) and
//! sleeps on a condition variable until then.
//!
//! The callback runs on one of the runtime's threads. It only sets a flag
//! and wakes the waiter; the waiter keeps the shared state alive through an
//! `Arc` whose second reference belongs to the callback. Should a runtime
//! never call back (it must, for `CL_COMPLETE`, even when the command
//! fails), the waiter still looks at the event's status every
//! [`RECHECK`], so a missed callback costs latency, not a hang.

use std::ffi::c_void;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use opencl3::event::{Event, CL_COMPLETE};
use opencl3::types::{cl_event, cl_int};

/// How often a waiter looks at the event itself, in case no callback comes.
const RECHECK: Duration = Duration::from_millis(50);

/// The flag a callback sets, and the waiter's wake-up.
#[derive(Default)]
struct Signal {
    done: Mutex<bool>,
    wake: Condvar,
}

extern "C" fn on_complete(_event: cl_event, _status: cl_int, user_data: *mut c_void) {
    // SAFETY: `user_data` is the `Arc<Signal>` that `wait_for` leaked for
    // this callback with `Arc::into_raw`; the runtime calls back once.
    let signal = unsafe { Arc::from_raw(user_data as *const Signal) };
    *signal.done.lock().unwrap_or_else(|p| p.into_inner()) = true;
    signal.wake.notify_all();
}

/// The event's status: `Ok(true)` complete, `Ok(false)` still queued or
/// running, `Err` the command failed (OpenCL's negative status).
fn status(event: &Event) -> Result<bool, cl_int> {
    match event.command_execution_status() {
        Ok(status) => {
            let status = status.0;
            if status < 0 {
                Err(status)
            } else {
                Ok(status == CL_COMPLETE)
            }
        }
        Err(error) => Err(error.0),
    }
}

/// How a wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Waited {
    /// The command had finished already: the host did not block.
    AlreadyDone,
    /// The host slept until the command finished.
    Blocked,
}

/// Waits until `event`'s command is complete, sleeping rather than
/// spinning. `Err` carries OpenCL's error code when the command failed.
pub(crate) fn wait_for(event: &Event) -> Result<Waited, opencl3::error_codes::ClError> {
    let cl_error = opencl3::error_codes::ClError;
    if status(event).map_err(cl_error)? {
        return Ok(Waited::AlreadyDone);
    }
    let signal = Arc::new(Signal::default());
    let user_data = Arc::into_raw(signal.clone()) as *mut c_void;
    if event
        .set_callback(CL_COMPLETE, on_complete, user_data)
        .is_err()
    {
        // SAFETY: the runtime refused the callback, so it never takes the
        // reference leaked above; take it back.
        drop(unsafe { Arc::from_raw(user_data as *const Signal) });
        event.wait()?;
        return Ok(Waited::Blocked);
    }
    let mut done = signal.done.lock().unwrap_or_else(|p| p.into_inner());
    while !*done {
        let (guard, timeout) = signal
            .wake
            .wait_timeout(done, RECHECK)
            .unwrap_or_else(|p| p.into_inner());
        done = guard;
        if timeout.timed_out() && status(event).map_err(cl_error)? {
            break;
        }
    }
    drop(done);
    // A command that failed is "complete" too: its status says which.
    status(event).map_err(cl_error)?;
    Ok(Waited::Blocked)
}
