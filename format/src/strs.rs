//! Small string helpers that keep core's generic machinery out of the browser's engine wasm
//! (issue 12, ninth round of `docs/design/wasm-size.md`): `str::contains(&str)` links core's
//! two-way searcher (`StrSearcher::new` alone is 1.4 kB of wasm) and `[S].join` one
//! `join_generic_copy` per element type (1 kB each).

/// Whether `needle` occurs in `hay` (as `hay.contains(needle)`), by comparing the bytes at
/// each offset: quadratic in the worst case, meant for short needles (headings, question
/// words). An empty needle occurs in every string.
pub fn contains(hay: &str, needle: &str) -> bool {
    let n = needle.as_bytes();
    n.is_empty() || hay.as_bytes().windows(n.len()).any(|w| w == n)
}

/// The strings of `parts` joined by `sep` (as `parts.join(sep)` for a slice of `&str`).
pub fn join(parts: &[&str], sep: &str) -> String {
    let mut out = String::new();
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            out.push_str(sep);
        }
        out.push_str(p);
    }
    out
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn contains_is_str_contains(hay in "[abé学 ]{0,12}", needle in "[abé学 ]{0,4}") {
            prop_assert_eq!(super::contains(&hay, &needle), hay.contains(needle.as_str()));
        }

        #[test]
        fn join_is_slice_join(parts in proptest::collection::vec("[ab学]{0,3}", 0..5), sep in "[ ,\n]{0,2}") {
            let refs: Vec<&str> = parts.iter().map(String::as_str).collect();
            prop_assert_eq!(super::join(&refs, &sep), refs.join(sep.as_str()));
        }
    }
}
