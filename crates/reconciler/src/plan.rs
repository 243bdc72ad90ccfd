//! Pure decisions of a pass, tested without a control plane.

use std::collections::BTreeSet;

use palisade_vap::Layout;

/// What a boundary's garbage collection keeps after its policies were written in `target`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Keep {
    /// The layouts whose objects of kept policies stay.
    pub layouts: Vec<Layout>,
    /// The switch bindings stay (the switch is not done).
    pub switch_bindings: bool,
}

/// SPEC 3.4, no gap: while the boundary has objects of a layout other than `target`
/// (`present`), they stay until every probe of the boundary confirmed the `target` objects at
/// work (`confirmed`); then only `target`'s stay, and the switch bindings go.
pub(crate) fn keep(present: &BTreeSet<Layout>, target: Layout, confirmed: bool) -> Keep {
    let switching = present.iter().any(|l| *l != target);
    if switching && !confirmed {
        let mut layouts: BTreeSet<Layout> = present.clone();
        layouts.insert(target);
        Keep {
            layouts: layouts.into_iter().collect(),
            switch_bindings: true,
        }
    } else {
        Keep {
            layouts: vec![target],
            switch_bindings: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Layout::{PerBoundary as B, PerPolicy as P, Shared as S};

    #[test]
    fn the_earlier_layout_stays_until_the_new_one_is_confirmed() {
        // (present, target, confirmed) -> (layouts kept, switch bindings kept)
        type Case = (&'static [Layout], Layout, bool, &'static [Layout], bool);
        let cases: &[Case] = &[
            // Nothing to switch from.
            (&[], B, false, &[B], false),
            (&[], B, true, &[B], false),
            (&[B], B, false, &[B], false),
            (&[S], S, true, &[S], false),
            // Switching, not confirmed: both stay, and the switch bindings.
            (&[B], S, false, &[B, S], true),
            (&[S], B, false, &[B, S], true),
            (&[P], B, false, &[P, B], true),
            (&[P, S], B, false, &[P, B, S], true),
            (&[B, S], S, false, &[B, S], true),
            // Confirmed: only the new layout stays.
            (&[B], S, true, &[S], false),
            (&[S], B, true, &[B], false),
            (&[P, B, S], B, true, &[B], false),
        ];
        for &(present, target, confirmed, layouts, switch_bindings) in cases {
            let present: BTreeSet<Layout> = present.iter().copied().collect();
            let mut expected = layouts.to_vec();
            expected.sort();
            assert_eq!(
                keep(&present, target, confirmed),
                Keep {
                    layouts: expected,
                    switch_bindings
                },
                "present {present:?}, target {target:?}, confirmed {confirmed}"
            );
        }
    }
}
