//! Stable sorting with one small merge sort for every element type (issue 12). Core's
//! `slice::sort*` (driftsort / ipnsort) instantiate several kilobytes of code per element
//! type and comparator: the browser's engine wasm held 178 such functions, 66.8 kB of its
//! 459 kB of code (`docs/design/wasm-size.md`, "Fifth round"). Here the merge sort itself is
//! one non-generic function over indices ([`order_of`]); each caller instantiates only its
//! comparator and the in-place permutation.
//!
//! [`sort_by`] gives exactly what `slice::sort_by` gives for any comparator that is a total
//! preorder (a stable sort's result is then unique); [`sort`] is used for `Ord` types
//! where equal elements are identical, so it also equals `sort_unstable`. O(n log n)
//! comparisons, 2n indices of extra memory.

use std::cmp::Ordering;

/// Sorts `v` stably by `cmp` (as `slice::sort_by`).
pub fn sort_by<T, F: FnMut(&T, &T) -> Ordering>(v: &mut [T], mut cmp: F) {
    if v.len() < 2 {
        return;
    }
    let order = {
        let v: &[T] = v;
        order_of(v.len(), &mut |i, j| cmp(&v[i], &v[j]) == Ordering::Less)
    };
    permute(v, order);
}

/// Sorts `v` stably by `key` (as `slice::sort_by_key`).
pub fn sort_by_key<T, K: Ord, F: FnMut(&T) -> K>(v: &mut [T], mut key: F) {
    sort_by(v, |a, b| key(a).cmp(&key(b)));
}

/// Sorts `v` ascending (as `slice::sort`, and as `sort_unstable` for types whose equal
/// values are identical).
pub fn sort<T: Ord>(v: &mut [T]) {
    sort_by(v, |a, b| a.cmp(b));
}

/// The stable ascending order of `0..n` under `less(i, j)` (index `i`'s element before
/// `j`'s): insertion sort of runs of 8, then bottom-up merges. Element `k` of the result
/// is the index of the element that goes to position `k`.
fn order_of(n: usize, less: &mut dyn FnMut(usize, usize) -> bool) -> Vec<usize> {
    const RUN: usize = 8;
    let mut a: Vec<usize> = (0..n).collect();
    let mut start = 0;
    while start < n {
        let end = (start + RUN).min(n);
        for i in start + 1..end {
            let x = a[i];
            let mut j = i;
            while j > start && less(x, a[j - 1]) {
                a[j] = a[j - 1];
                j -= 1;
            }
            a[j] = x;
        }
        start = end;
    }
    let mut b = vec![0usize; n];
    let mut width = RUN;
    while width < n {
        let mut start = 0;
        while start < n {
            let mid = (start + width).min(n);
            let end = (start + 2 * width).min(n);
            let (mut i, mut j, mut k) = (start, mid, start);
            while i < mid && j < end {
                // The right run's element goes first only if strictly before: stable.
                if less(a[j], a[i]) {
                    b[k] = a[j];
                    j += 1;
                } else {
                    b[k] = a[i];
                    i += 1;
                }
                k += 1;
            }
            b[k..k + (mid - i)].copy_from_slice(&a[i..mid]);
            k += mid - i;
            b[k..k + (end - j)].copy_from_slice(&a[j..end]);
            start = end;
        }
        std::mem::swap(&mut a, &mut b);
        width *= 2;
    }
    a
}

/// Rearranges `v` so that position `k` holds the element that was at `order[k]`, by
/// swaps along each cycle of the permutation.
fn permute<T>(v: &mut [T], mut order: Vec<usize>) {
    const DONE: usize = usize::MAX;
    for i in 0..v.len() {
        if order[i] == DONE {
            continue;
        }
        let mut cur = i;
        loop {
            let next = order[cur];
            order[cur] = DONE;
            if next == i {
                break;
            }
            v.swap(cur, next);
            cur = next;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn sort_by_equals_std_stable_sort(v in prop::collection::vec((0u8..6, any::<u16>()), 0..300)) {
            // Sorting by the first field only: ties keep their order, as std's stable sort.
            let mut ours = v.clone();
            sort_by(&mut ours, |a, b| a.0.cmp(&b.0));
            let mut std = v.clone();
            std.sort_by_key(|a| a.0);
            prop_assert_eq!(ours, std);
        }

        #[test]
        fn sort_equals_std_sort(v in prop::collection::vec(".{0,3}", 0..200)) {
            let mut ours = v.clone();
            sort(&mut ours);
            let mut std = v.clone();
            std.sort_unstable();
            prop_assert_eq!(ours, std);
        }

        #[test]
        fn scores_sort_as_the_engine_sorts_them(v in prop::collection::vec((0u32..50, -3i8..3), 0..400)) {
            let v: Vec<(u32, f32)> = v.into_iter().map(|(d, s)| (d, f32::from(s) * 0.5)).collect();
            let cmp = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
            let mut ours = v.clone();
            sort_by(&mut ours, cmp);
            let mut std = v;
            std.sort_by(cmp);
            prop_assert_eq!(ours, std);
        }
    }

    #[test]
    fn every_permutation_of_six_sorts() {
        let mut p: Vec<u8> = (0..6).collect();
        // Heap's algorithm, iteratively: all 720 orders.
        let mut c = [0usize; 6];
        let check = |p: &[u8]| {
            let mut s = p.to_vec();
            sort_by_key(&mut s, |&x| x);
            assert_eq!(s, [0, 1, 2, 3, 4, 5], "{p:?}");
        };
        check(&p);
        let mut i = 0;
        while i < 6 {
            if c[i] < i {
                if i % 2 == 0 {
                    p.swap(0, i);
                } else {
                    p.swap(c[i], i);
                }
                check(&p);
                c[i] += 1;
                i = 0;
            } else {
                c[i] = 0;
                i += 1;
            }
        }
    }
}
