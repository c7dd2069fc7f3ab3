//! Float text without core's float formatting and parsing (`flt2dec`, `dec2flt`), which
//! cost the browser's engine wasm ~13 kB of code and a 10.4 kB table (issue 12,
//! `docs/design/wasm-size.md`). Both functions give exactly what `format!("{x}")` and
//! `str::parse::<f32>` give, on the inputs they take (tests: every `f32` of a strided
//! sweep and random bit patterns; every decimal of ≤ 8 fraction digits in a range).

/// `x` for an error message: [`f32_display`] natively; in wasm32 zmij's shortest digits as
/// zmij writes them (`1e-7` rather than `0.0000001`, `NaN`, `inf`: the same value, and the
/// browser's engine leaves out `f32_display`'s 3.4 kB of code; issue 12).
pub fn f32_message(x: f32) -> String {
    #[cfg(target_arch = "wasm32")]
    {
        zmij::Buffer::new().format(x).to_string()
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        f32_display(x)
    }
}

/// `x` as `format!("{x}")` writes an `f32` (`Display`): the shortest digits that read back
/// as `x`, laid out without an exponent (`1e20` → `100000000000000000000`, `1e-7` →
/// `0.0000001`, `1.0` → `1`, `-0.0` → `-0`), `NaN`, `inf`, `-inf`. The digits come from
/// `zmij` (Schubfach: shortest round-trip digits, the nearest when several are that
/// short, as core's Grisu/Dragon give), which the engine links anyway for its JSON.
pub fn f32_display(x: f32) -> String {
    let mut buf = zmij::Buffer::new();
    let text = buf.format(x);
    if !x.is_finite() {
        return text.to_string(); // "NaN", "inf", "-inf", as Display
    }
    // zmij writes `[-]D.DDD` or `[-]D.DDDe[-]X`: read it as `d · 10^q`.
    let text = text.trim_start_matches('-');
    let (mantissa, exp10) = match text.split_once('e') {
        Some((m, e)) => (m, e.parse::<i32>().unwrap_or(0)),
        None => (text, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let mut d: u64 = 0;
    for b in int.bytes().chain(frac.bytes()) {
        d = d * 10 + u64::from(b - b'0');
    }
    let q = exp10 - frac.len() as i32;
    // Two shortest candidates equally near `x` (its exact value ends in 5 one digit further
    // on): zmij takes the even one, core's Display the upper one.
    if d != 0 && is_tie_above(x.abs(), d, q) {
        d += 1;
    }
    let mut out = String::with_capacity(24);
    if x.is_sign_negative() {
        out.push('-');
    }
    let all = d.to_string();
    let digits = all.trim_end_matches('0');
    if d == 0 {
        out.push('0');
        return out;
    }
    let point = all.len() as i32 + q; // digits before the decimal point
    let n = digits.len() as i32;
    if point <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-point) as usize));
        out.push_str(digits);
    } else if point < n {
        out.push_str(&digits[..point as usize]);
        out.push('.');
        out.push_str(&digits[point as usize..]);
    } else {
        out.push_str(digits);
        out.extend(std::iter::repeat_n('0', (point - n) as usize));
    }
    out
}

/// Whether the finite `x ≥ 0` is exactly `(d + ½) · 10^q`, in integers: with `x = m·2^e`,
/// `m·2^(e+1−q) = (2d+1)·5^q`. Each power of 2 and 5 sits on one side only, so a tie needs
/// `e + 1 − q ≤ 0` (the right side is odd) and is below 2⁵⁵ (`m < 2²⁴`, `2d+1 < 2³¹`): any
/// overflow means no tie.
fn is_tie_above(x: f32, d: u64, q: i32) -> bool {
    let bits = x.to_bits();
    let (exp, frac) = ((bits >> 23) & 0xff, bits & 0x7f_ffff);
    let (m, e) = if exp == 0 {
        (frac, -149)
    } else {
        (frac | 0x80_0000, exp as i32 - 150)
    };
    let t = e + 1 - q;
    if t > 0 || -t > 64 {
        return false;
    }
    let pow5 = |k: i32| 5u128.checked_pow(k.unsigned_abs());
    let (left, right) = if q >= 0 {
        let Some(p) = pow5(q) else { return false };
        (Some(u128::from(m)), (2 * u128::from(d) + 1).checked_mul(p))
    } else {
        let Some(p) = pow5(-q) else { return false };
        (u128::from(m).checked_mul(p), Some(2 * u128::from(d) + 1))
    };
    match (left, right.and_then(|r| r.checked_mul(1u128 << (-t)))) {
        (Some(l), Some(r)) => l == r,
        _ => false,
    }
}

/// Reads a plain decimal `[+-]D*[.D*]` (at least one digit, ASCII only, no exponent) whose
/// integer part has at most 4 significant digits and whose fraction has at most 8 digits
/// after trailing zeros are dropped, as the correctly rounded `f32`: the same value as
/// `str::parse::<f32>` (sign of zero included). Returns `None` for anything else (more
/// digits, an exponent, `inf`, `nan`, other characters): the caller decides whether to
/// refuse it or parse it another way.
///
/// Why it is exact: the decimal is `d = N / 10^k` with `N < 2^53` and `k ≤ 8`, so the `f64`
/// division is exact up to its rounding (error ≤ 2⁻⁵⁴⁻ʲ for `d` in `[2⁻ʲ⁻¹, 2⁻ʲ)`). The
/// `f32` rounding boundaries there are odd multiples of 2⁻²⁵⁻ʲ; for `d < 2¹⁶` no such
/// multiple equals a decimal with `k ≤ 8` (powers of two), so `|d − m| ≥ 10⁻⁸·2⁻²⁵⁻ʲ`,
/// more than the `f64` error (2⁻²⁹ < 10⁻⁸): rounding the `f64` to `f32` lands where `d`
/// itself rounds (the sketch in `docs/design/wasm-size.md`).
pub fn decimal_f32(s: &str) -> Option<f32> {
    let (neg, rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let (int, frac) = rest.split_once('.').unwrap_or((rest, ""));
    let all_digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
    if int.is_empty() && frac.is_empty() || !all_digits(int) || !all_digits(frac) {
        return None;
    }
    let int = int.trim_start_matches('0');
    let frac = frac.trim_end_matches('0');
    if int.len() > 4 || frac.len() > 8 {
        return None;
    }
    let mut n: u64 = 0;
    for b in int.bytes().chain(frac.bytes()) {
        n = n * 10 + u64::from(b - b'0');
    }
    const POW10: [f64; 9] = [1.0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8];
    let v = (n as f64 / POW10[frac.len()]) as f32;
    Some(if neg { -v } else { v })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn check_display(x: f32) {
        assert_eq!(f32_display(x), format!("{x}"), "bits {:#010x}", x.to_bits());
    }

    #[test]
    fn display_of_special_values() {
        for x in [
            0.0,
            -0.0,
            1.0,
            -5.0,
            1.2,
            0.75,
            1e20,
            1e-7,
            f32::MAX,
            f32::MIN,
            f32::MIN_POSITIVE,
            f32::EPSILON,
            1e-45, // smallest subnormal
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            16777216.0,
            123456.79,
        ] {
            check_display(x);
        }
    }

    /// Every 997th bit pattern (4.3 M floats: every exponent, both signs, subnormals, NaNs).
    #[test]
    fn display_equals_std_on_a_strided_sweep_of_all_f32() {
        let mut bits: u32 = 0;
        loop {
            check_display(f32::from_bits(bits));
            match bits.checked_add(997) {
                Some(b) => bits = b,
                None => break,
            }
        }
    }

    /// All 4.3 billion `f32`s (about 35 min on one core here): run by hand with
    /// `cargo test --release -p jikji-format --lib num -- --ignored`.
    #[test]
    #[ignore]
    fn display_equals_std_on_every_f32() {
        for bits in 0..=u32::MAX {
            check_display(f32::from_bits(bits));
        }
    }

    proptest! {
        #[test]
        fn display_equals_std_on_random_bits(bits in any::<u32>()) {
            check_display(f32::from_bits(bits));
        }

        /// Random plain decimals in the reader's domain, in every spelling it takes.
        #[test]
        fn decimal_equals_std_parse(
            sign in prop::sample::select(vec!["", "+", "-"]),
            lead_zeros in 0usize..3,
            int in 0u32..10_000,
            no_int in any::<bool>(),
            frac_len in 0usize..=8,
            frac in 0u64..100_000_000,
            trailing in 0usize..4,
        ) {
            let int = if no_int && int == 0 { String::new() } else { format!("{}{int}", "0".repeat(lead_zeros)) };
            let f = format!("{frac:08}");
            let f = &f[..frac_len];
            let text = if frac_len == 0 && trailing == 0 {
                format!("{sign}{int}")
            } else {
                format!("{sign}{int}.{f}{}", "0".repeat(trailing))
            };
            let want = text.parse::<f32>();
            match decimal_f32(&text) {
                Some(got) => prop_assert_eq!(got.to_bits(), want.unwrap().to_bits(), "{}", text),
                None => prop_assert!(text == sign || text == format!("{sign}."), "{} refused", text),
            }
        }
    }

    /// Every decimal `n / 10^digits` for `n` in `lo..=hi`, written with exactly `digits`
    /// fraction digits, read as `str::parse::<f32>` reads it.
    fn sweep(digits: u32, lo: u64, hi: u64) {
        let scale = 10u64.pow(digits);
        for n in lo..=hi {
            let text = format!("{}.{:0w$}", n / scale, n % scale, w = digits as usize);
            let got = decimal_f32(&text).unwrap();
            assert_eq!(
                got.to_bits(),
                text.parse::<f32>().unwrap().to_bits(),
                "{text}"
            );
        }
    }

    /// Every 8-digit decimal in [0, 0.01] and [0.99, 1] and every decimal of 1…4 fraction
    /// digits below 100 (3.1 M, ~1 s); the whole of [0, 1] by 10⁻⁸ and of [0, 10 000) by
    /// 10⁻¹…10⁻⁴ is the ignored test below.
    #[test]
    fn decimal_equals_std_parse_on_every_8_digit_weight_near_0_and_1() {
        sweep(8, 0, 1_000_000);
        sweep(8, 99_000_000, 100_000_000);
        for digits in 1..=4 {
            sweep(digits, 0, 100 * 10u64.pow(digits));
        }
    }

    /// Every weight 0.00000000 … 1.00000000 and every decimal of 1…4 fraction digits below
    /// 10 000 (211 M; about 1 min here): `cargo test --release -p jikji-format --lib num --
    /// --ignored`.
    #[test]
    #[ignore]
    fn decimal_equals_std_parse_on_every_8_digit_weight() {
        sweep(8, 0, 100_000_000);
        for digits in 1..=4 {
            sweep(digits, 0, 10_000 * 10u64.pow(digits) - 1);
        }
    }

    #[test]
    fn decimal_refuses_what_it_cannot_read_exactly() {
        for text in [
            "",
            "+",
            "-",
            ".",
            "1e-1",
            "0.123456789",
            "10000",
            "nan",
            "inf",
            "0x1",
            " 1",
            "1 ",
            "٣",
            "1..2",
            "0.5.",
        ] {
            assert_eq!(decimal_f32(text), None, "{text:?}");
        }
        assert_eq!(
            decimal_f32("-0").map(f32::to_bits),
            Some((-0.0f32).to_bits())
        );
        assert_eq!(decimal_f32("0.1234567800000"), Some(0.12345678));
        assert_eq!(decimal_f32("00009999.5"), Some(9999.5));
    }
}
