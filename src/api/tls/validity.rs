//! When a certificate stops being valid: its `notAfter`, read from the DER with a small walker of
//! the few fields before it (RFC 5280 §4.1: `Certificate ::= SEQUENCE { tbsCertificate SEQUENCE {
//! [0] version OPTIONAL, serialNumber, signature, issuer, validity SEQUENCE { notBefore, notAfter
//! } ... } ... }`). rustls and webpki check validity but do not say it; a full X.509 parser for one
//! date is more than the metric needs.

/// One DER element: its tag and its contents, and what follows it.
fn element(der: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = der.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let bytes = usize::from(first & 0x7f);
        if bytes == 0 || bytes > 4 || rest.len() < bytes {
            return None;
        }
        let len = rest[..bytes].iter().fold(0usize, |len, &b| (len << 8) | usize::from(b));
        (len, &rest[bytes..])
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

const SEQUENCE: u8 = 0x30;
const VERSION: u8 = 0xa0;
const UTC_TIME: u8 = 0x17;
const GENERALIZED_TIME: u8 = 0x18;

/// The certificate's `notAfter` as Unix seconds, or `None` when the DER is not a certificate.
pub fn not_after(der: &[u8]) -> Option<i64> {
    let (SEQUENCE, certificate, _) = element(der)? else { return None };
    let (SEQUENCE, tbs, _) = element(certificate)? else { return None };
    let mut rest = tbs;
    let (tag, _, after) = element(rest)?;
    if tag == VERSION {
        rest = after;
    }
    // serialNumber, signature, issuer.
    for _ in 0..3 {
        rest = element(rest)?.2;
    }
    let (SEQUENCE, validity, _) = element(rest)? else { return None };
    let (_, _, after_not_before) = element(validity)?;
    let (tag, time, _) = element(after_not_before)?;
    let text = std::str::from_utf8(time).ok()?;
    let text = text.strip_suffix('Z')?;
    let (year, text) = match tag {
        // RFC 5280 §4.1.2.5.1: two-digit years 50-99 are 19xx, 00-49 are 20xx.
        UTC_TIME => {
            let yy: i64 = text.get(..2)?.parse().ok()?;
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, text.get(2..)?)
        }
        GENERALIZED_TIME => (text.get(..4)?.parse().ok()?, text.get(4..)?),
        _ => return None,
    };
    if text.len() != 10 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let field = |at: usize| -> Option<i64> { text.get(at..at + 2)?.parse().ok() };
    let (month, day, hour, minute, second) = (field(0)?, field(2)?, field(4)?, field(6)?, field(8)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    Some(days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second)
}

/// Days from 1970-01-01 to a date of the proleptic Gregorian calendar (the well-known
/// era-based computation: 400-year eras of 146,097 days, years starting in March).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_count_days_from_the_epoch() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(2049, 12, 31), 29_219);
    }

    #[test]
    fn reads_the_not_after_of_a_generated_certificate() {
        let mut params = rcgen::CertificateParams::new(vec!["node-1.leafraft".to_string()]).expect("params");
        params.not_before = rcgen::date_time_ymd(2024, 1, 1);
        // 2049 is a UTCTime, 2051 a GeneralizedTime (RFC 5280 §4.1.2.5).
        for (year, unix) in [(2049, 2_524_521_600), (2051, 2_587_593_600)] {
            params.not_after = rcgen::date_time_ymd(year, 12, 31);
            let key = rcgen::KeyPair::generate().expect("key");
            let certificate = params.clone().self_signed(&key).expect("certificate");
            assert_eq!(not_after(certificate.der()), Some(unix), "{year}-12-31");
        }
    }

    #[test]
    fn anything_else_is_none() {
        assert_eq!(not_after(b""), None);
        assert_eq!(not_after(&[0x30, 0x03, 0x02, 0x01, 0x01]), None);
        assert_eq!(not_after(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]), None);
    }
}
