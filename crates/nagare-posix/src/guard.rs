//! The mark a thread carries while a call of this layer runs: a library
//! standing in for libc sends that thread's calls to the kernel.

use std::cell::Cell;

thread_local! {
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

/// Held while a call of this layer runs on this thread (nested calls keep
/// the mark until the outermost ends).
pub struct Entered {
    outer: bool,
}

impl Entered {
    /// Marks this thread as inside the layer.
    pub fn new() -> Entered {
        Entered { outer: !INSIDE.with(|c| c.replace(true)) }
    }

    /// Whether this thread is inside a call of this layer.
    pub fn inside() -> bool {
        INSIDE.with(Cell::get)
    }

    /// In a child just forked: outside the layer, even if the fork came
    /// from a signal handler that ran inside one of its calls (its child
    /// goes on as the program, whose calls must reach the layer).
    pub(crate) fn leave_in_child() {
        INSIDE.with(|c| c.set(false));
    }
}

impl Default for Entered {
    fn default() -> Entered {
        Entered::new()
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        if self.outer {
            INSIDE.with(|c| c.set(false));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mark_lasts_until_the_outermost_call_ends() {
        assert!(!Entered::inside());
        {
            let _a = Entered::new();
            {
                let _b = Entered::new();
                assert!(Entered::inside());
            }
            assert!(Entered::inside(), "a nested call's end keeps the mark");
        }
        assert!(!Entered::inside());
    }
}
