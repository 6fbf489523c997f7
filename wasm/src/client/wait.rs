//! Waiting that can be cut short: backoff sleeps end early when the
//! network comes back, the page becomes visible, or the watch is stopped.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use gloo_timers::callback::Timeout;

/// A flag that a timer, an event listener or `stop()` can raise, waking
/// whoever waits on it.
#[derive(Default)]
pub struct Wakeup {
    fired: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

impl Wakeup {
    /// Raises the flag and wakes the waiter.
    pub fn fire(&self) {
        self.fired.set(true);
        let waker = self.waker.borrow_mut().take();
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// Waits until the flag is raised, or `ms` pass (`None`: no timer).
    /// The timer is cancelled when the wait ends (gloo's `Timeout` clears
    /// itself on drop), so no timer outlives a stopped watch.
    pub async fn sleep(self: &Rc<Self>, ms: Option<f64>) {
        self.fired.set(false);
        let _timer = ms.map(|ms| {
            let me = Rc::clone(self);
            // setTimeout takes whole milliseconds up to 2^31 - 1.
            let ms = ms.clamp(0.0, 2_147_483_647.0) as u32;
            Timeout::new(ms, move || me.fire())
        });
        Fired(Rc::clone(self)).await;
    }
}

struct Fired(Rc<Wakeup>);

impl Future for Fired {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0.fired.get() {
            Poll::Ready(())
        } else {
            *self.0.waker.borrow_mut() = Some(cx.waker().clone());
            Poll::Pending
        }
    }
}
