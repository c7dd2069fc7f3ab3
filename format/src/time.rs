//! ISO 8601 dates and times (the subset front matter uses), as Unix milliseconds.
//!
//! Accepted: `YYYY-MM-DD` (midnight UTC of that day), `YYYY-MM-DDTHH:MM`,
//! `YYYY-MM-DDTHH:MM:SS` and either with fractional seconds, each optionally followed by
//! `Z` or an offset `±HH:MM` / `±HHMM` (no offset = UTC). A space may stand for the `T`
//! (RFC 3339 §5.6 allows it). Pure arithmetic, no clock: the same in native and wasm builds.

/// Days from 1970-01-01 to the proleptic Gregorian date `y-m-d` (Howard Hinnant's
/// `days_from_civil`). `m` is 1..=12, `d` is 1..=31 (not checked against the month).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        _ => 28,
    }
}

fn num(s: &str, len: usize) -> Option<u32> {
    if s.len() != len || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Parses an ISO 8601 date or date-time (see the module doc) into milliseconds since the
/// Unix epoch (UTC). `None` if `s` is not one of the accepted forms or names an impossible
/// date or time (month 13, February 30, 25:00, …).
pub fn parse_iso8601_ms(s: &str) -> Option<i64> {
    let s = s.trim();
    if s.len() < 10 || !s.is_char_boundary(10) {
        return None;
    }
    let (date, rest) = s.split_at(10);
    let b = date.as_bytes();
    if b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let y = i64::from(num(&date[..4], 4)?);
    let m = num(&date[5..7], 2)?;
    let d = num(&date[8..10], 2)?;
    if !(1..=12).contains(&m) || d == 0 || d > days_in_month(y, m) {
        return None;
    }
    let mut ms = days_from_civil(y, m, d) * 86_400_000;
    if rest.is_empty() {
        return Some(ms);
    }
    let rest = rest.strip_prefix(['T', 't', ' '])?;
    // Split the time from the zone designator.
    let zone_at = rest.find(['Z', 'z', '+', '-']).unwrap_or(rest.len());
    let (time, zone) = rest.split_at(zone_at);
    let mut parts = time.splitn(3, ':');
    let hh = num(parts.next()?, 2)?;
    let mm = num(parts.next()?, 2)?;
    let (ss, frac_ms) = match parts.next() {
        None => (0, 0),
        Some(sec) => {
            let (whole, frac) = sec.split_once(['.', ',']).unwrap_or((sec, ""));
            let ss = num(whole, 2)?;
            if !frac.bytes().all(|c| c.is_ascii_digit()) || (sec.len() > 2 && frac.is_empty()) {
                return None;
            }
            let f: String = frac.chars().chain("000".chars()).take(3).collect();
            (ss, f.parse::<u32>().ok()?)
        }
    };
    if hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    ms += i64::from(hh * 3_600_000 + mm * 60_000 + ss * 1000 + frac_ms);
    match zone {
        "" | "Z" | "z" => {}
        z => {
            let sign = match z.as_bytes()[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            // The sign is one ASCII byte, so `[1..]` is a char boundary; the fixed-width
            // slices below are only taken on an all-ASCII offset (a multibyte char such as
            // `é` in `+1é1` would put them inside a character).
            let z = &z[1..];
            if !z.is_ascii() {
                return None;
            }
            let (oh, om) = match z.len() {
                5 if z.as_bytes()[2] == b':' => (num(&z[..2], 2)?, num(&z[3..], 2)?),
                4 => (num(&z[..2], 2)?, num(&z[2..], 2)?),
                2 => (num(z, 2)?, 0),
                _ => return None,
            };
            if oh > 23 || om > 59 {
                return None;
            }
            ms -= sign * i64::from(oh * 3_600_000 + om * 60_000);
        }
    }
    Some(ms)
}

/// Formats Unix milliseconds as `YYYY-MM-DD` (UTC).
pub fn format_date(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    // civil_from_days (Hinnant).
    let z = days + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn dates_and_times() {
        assert_eq!(parse_iso8601_ms("1970-01-01"), Some(0));
        assert_eq!(parse_iso8601_ms("2000-03-01"), Some(951_868_800_000));
        assert_eq!(
            parse_iso8601_ms("2026-11-30T12:30:00Z"),
            Some(1_796_041_800_000)
        );
        assert_eq!(
            parse_iso8601_ms("2026-11-30T21:30:00+09:00"),
            parse_iso8601_ms("2026-11-30T12:30Z")
        );
        assert_eq!(
            parse_iso8601_ms("2026-11-30 12:30:00.250"),
            Some(1_796_041_800_250)
        );
        assert_eq!(parse_iso8601_ms("2024-02-29"), Some(1_709_164_800_000));
    }

    #[test]
    fn impossible_or_malformed_is_none() {
        for s in [
            "2025-02-29",
            "2026-13-01",
            "2026-1-01",
            "30/11/2026",
            "2026-11-30T25:00",
            "2026-11-30T12",
            "2026-11-30X",
            "2026-11-30T12:00Z0900",
            "next week",
            "",
        ] {
            assert_eq!(parse_iso8601_ms(s), None, "{s}");
        }
    }

    #[test]
    fn expires_with_multibyte_char_panicked() {
        // Issue 11: `expires: 2026-01-01T10:00+1é1` sliced `&z[..2]` inside `é`.
        for s in [
            "2026-01-01T10:00+1é1",
            "2026-01-01T10:00+é1",
            "2026-01-01T10:00+1é",
            "2026-01-01T10:00-é",
            "2026-01-01T10:00+0é:00",
            "2026-01-01T10:00+09:é",
            "2026-01-01T10:00+論語",
            "2026-01-01T10:00Zé",
            "2026-01-01T1é:00",
            "2026-01-01T10:00:0é",
            "2026-01-01T10:00:00.é",
            "2026-01-0é",
            "202é-01-01",
        ] {
            assert_eq!(parse_iso8601_ms(s), None, "{s}");
        }
    }

    /// ISO-8601-like strings: a date-like head, a separator, a time-like part, then a
    /// tail of zone-like pieces mixed with multibyte characters, so that generated strings
    /// reach every slicing branch (date, time, fraction, zone) with a character of 2–4
    /// bytes at any position.
    fn iso_like() -> impl Strategy<Value = String> {
        let date = prop_oneof![
            Just("2026-01-01".to_string()),
            "[0-9]{4}-[0-9]{2}-[0-9]{2}",
            "[0-9é論-]{8,12}",
            Just(String::new()),
        ];
        let sep = prop_oneof![Just("T"), Just(" "), Just("t"), Just(""), Just("é")];
        let time = prop_oneof![
            Just("10:00".to_string()),
            Just("10:00:00".to_string()),
            Just("10:00:00.250".to_string()),
            "[0-9]{1,2}:[0-9]{1,2}(:[0-9é]{1,3})?([.,][0-9é]{0,4})?",
            Just(String::new()),
        ];
        let sign = prop_oneof![Just("+"), Just("-"), Just("Z"), Just("")];
        let piece = prop_oneof![
            Just(":".to_string()),
            "[0-9]{1,2}",
            Just("é".to_string()),
            Just("論".to_string()),
            Just("\u{10348}".to_string()),
            Just("\u{feff}".to_string()),
            any::<char>().prop_map(String::from),
        ];
        (
            date,
            sep,
            time,
            sign,
            proptest::collection::vec(piece, 0..4),
        )
            .prop_map(|(d, s, t, z, tail)| format!("{d}{s}{t}{z}{}", tail.concat()))
    }

    proptest! {
        // Cheap (microseconds a case): enough cases that a panic on one multibyte
        // position is found on every run, not one run in ten.
        #![proptest_config(ProptestConfig::with_cases(8192))]

        #[test]
        fn parse_never_panics_on_arbitrary_strings(s in any::<String>()) {
            let _ = parse_iso8601_ms(&s);
        }

        #[test]
        fn parse_never_panics_on_iso_like_strings(s in iso_like()) {
            if let Some(ms) = parse_iso8601_ms(&s) {
                // Whatever parses formats back to a date without panicking.
                let _ = format_date(ms);
            }
        }

        #[test]
        fn parse_never_panics_after_a_valid_prefix(
            prefix in prop_oneof![Just("2026-01-01T10:00"), Just("2026-01-01T10:00:00"),
                                  Just("2026-01-01T10:00+"), Just("2026-01-01T10:00-0")],
            tail in ".{0,6}",
        ) {
            let _ = parse_iso8601_ms(&format!("{prefix}{tail}"));
        }
    }

    #[test]
    fn format_round_trips() {
        for s in [
            "1970-01-01",
            "2024-02-29",
            "2026-11-30",
            "1969-12-31",
            "2100-03-01",
        ] {
            assert_eq!(format_date(parse_iso8601_ms(s).unwrap()), s);
        }
    }
}
