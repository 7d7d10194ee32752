//! The `checks` of an ImagePromotion spec, validated and parsed before any check runs: the
//! durations and quantities become numbers, each limit keeps the text the messages quote back,
//! and anything that cannot be evaluated is refused with a message naming its field. Pure; the
//! evaluation against an image is [`crate::controller::checks`].

use std::time::Duration;

use crate::api::parse_go_duration;
use crate::controller::crd::Checks;

/// One entry of `requiredLabels`: `key` (present and non-empty) or `key=value` (equal).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelRequirement {
    /// The label key.
    pub key: String,
    /// The required value; `None` requires any non-empty value.
    pub value: Option<String>,
}

/// A parsed limit and the text it was written as, which the messages quote back.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Limit<T> {
    /// The parsed value.
    pub value: T,
    /// The text from the ImagePromotion (`720h`, `5Gi`).
    pub text: String,
}

/// The checks of an ImagePromotion, validated and parsed ([`Checks::parse`]). An empty list,
/// `None` or `false` means the check is not configured.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ParsedChecks {
    /// Labels the image config must carry.
    pub required_labels: Vec<LabelRequirement>,
    /// Pull-spec prefixes, without a trailing `/`.
    pub allowed_registries: Vec<String>,
    /// Allowed CPU architectures.
    pub allowed_architectures: Vec<String>,
    /// Allowed operating systems.
    pub allowed_os: Vec<String>,
    /// Maximum age since the image was built.
    pub max_age: Option<Limit<Duration>>,
    /// Maximum size in bytes.
    pub max_size: Option<Limit<u64>>,
    /// Whether the image must name a non-root user.
    pub non_root_user: bool,
}

impl ParsedChecks {
    /// True when no check is configured, so the evaluation yields no outcomes.
    pub(crate) fn is_empty(&self) -> bool {
        self == &ParsedChecks::default()
    }
}

impl Checks {
    /// Validates every configured check and parses its durations and quantities. The error
    /// lists every problem, `; `-separated, each naming the field
    /// (`checks.maxAge: "7 days" is not a duration (use e.g. "168h")`).
    pub fn parse(&self) -> Result<ParsedChecks, String> {
        let mut errors = Vec::new();
        let e = &mut errors;
        let parsed = ParsedChecks {
            required_labels: each("requiredLabels", &self.required_labels, label, e),
            allowed_registries: each("allowedRegistries", &self.allowed_registries, prefix, e),
            allowed_architectures: each(
                "allowedArchitectures",
                &self.allowed_architectures,
                name,
                e,
            ),
            allowed_os: each("allowedOS", &self.allowed_os, name, e),
            max_age: limit("maxAge", self.max_age.as_deref(), max_age, e),
            max_size: limit("maxSize", self.max_size.as_deref(), max_size, e),
            non_root_user: self.non_root_user,
        };
        if errors.is_empty() {
            Ok(parsed)
        } else {
            Err(errors.join("; "))
        }
    }
}

/// Parses every entry of the list `field`; a refused one adds `checks.{field}[i]: why`.
fn each<T>(
    field: &str,
    entries: &[String],
    parse: fn(&str) -> Result<T, String>,
    errors: &mut Vec<String>,
) -> Vec<T> {
    let mut parsed = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        match parse(entry) {
            Ok(value) => parsed.push(value),
            Err(why) => errors.push(format!("checks.{field}[{i}]: {why}")),
        }
    }
    parsed
}

/// Parses the limit `field`, if set; a refused one adds `checks.{field}: "text" why`.
fn limit<T>(
    field: &str,
    text: Option<&str>,
    parse: fn(&str) -> Result<T, String>,
    errors: &mut Vec<String>,
) -> Option<Limit<T>> {
    let text = text?;
    match parse(text) {
        Ok(value) => Some(Limit {
            value,
            text: text.to_string(),
        }),
        Err(why) => {
            errors.push(format!("checks.{field}: {text:?} {why}"));
            None
        }
    }
}

fn label(entry: &str) -> Result<LabelRequirement, String> {
    let (key, value) = match entry.split_once('=') {
        Some((key, value)) => (key, Some(value.to_string())),
        None => (entry, None),
    };
    if key.is_empty() || key.chars().any(char::is_whitespace) {
        return Err(format!(
            "{entry:?} is not a label requirement (use \"key\" or \"key=value\")"
        ));
    }
    Ok(LabelRequirement {
        key: key.to_string(),
        value,
    })
}

fn prefix(entry: &str) -> Result<String, String> {
    let prefix = entry.trim_end_matches('/');
    if prefix.is_empty() || prefix.chars().any(char::is_whitespace) {
        return Err(format!(
            "{entry:?} is not a registry or repository prefix (use e.g. \"quay.io/org\")"
        ));
    }
    Ok(prefix.to_string())
}

fn name(entry: &str) -> Result<String, String> {
    if entry.trim().is_empty() {
        return Err("must not be empty".into());
    }
    Ok(entry.to_string())
}

fn max_age(text: &str) -> Result<Duration, String> {
    match parse_go_duration(text) {
        Ok(limit) if limit.is_zero() => Err("must be greater than zero".into()),
        Ok(limit) => Ok(limit),
        Err(_) => Err("is not a duration (use e.g. \"168h\")".into()),
    }
}

fn max_size(text: &str) -> Result<u64, String> {
    match parse_quantity_bytes(text) {
        Ok(0) => Err("must be greater than zero".into()),
        Ok(limit) => Ok(limit),
        Err(QuantityError::Milli) => Err(format!(
            "is milli-bytes (the suffix m means 1/1000); use e.g. \"{}M\" or \"{}Mi\"",
            text.trim_end_matches('m'),
            text.trim_end_matches('m')
        )),
        Err(QuantityError::Invalid) => {
            Err("is not a quantity (use e.g. \"5Gi\", \"500M\" or \"1200000\")".into())
        }
        Err(QuantityError::TooLarge) => Err("is too large".into()),
    }
}

/// Why a quantity is not a whole number of bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum QuantityError {
    /// Not `<decimal>[suffix]` as Kubernetes' `resource.ParseQuantity` accepts it.
    Invalid,
    /// The `m` (milli) suffix, almost always meant as `M`.
    Milli,
    /// Larger than `u64::MAX` bytes.
    TooLarge,
}

/// Parses a Kubernetes quantity (`5Gi`, `500M`, `1.5G`, `12e6`, `1200000`) as bytes, rounding a
/// fractional result up as `Quantity.Value()` does. Negative quantities are invalid here.
///
/// Written here: k8s-openapi's `Quantity` is only the string, and the one crate that parses it
/// (`k8s_quantity_parser` 0.1, built on k8s-openapi 0.14) reads neither fractions (`1.5G`) nor
/// exponents (`12e6`) and multiplies unchecked, so a large value from an inline spec overflows.
fn parse_quantity_bytes(text: &str) -> Result<u64, QuantityError> {
    let number_len = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(number_len);
    let number = number.strip_prefix('+').unwrap_or(number);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let all_digits = |s: &str| s.chars().all(|c| c.is_ascii_digit());
    if whole.len() + fraction.len() == 0 || !all_digits(whole) || !all_digits(fraction) {
        return Err(QuantityError::Invalid);
    }
    // value = digits * base^power / 10^scale, computed exactly in u128.
    let digits = format!("{whole}{fraction}");
    let digits = digits.trim_start_matches('0');
    if digits.len() > 30 {
        return Err(QuantityError::TooLarge);
    }
    // At most 30 ASCII digits: read as they are, they cannot fail to parse or overflow.
    let mantissa = digits
        .bytes()
        .fold(0u128, |n, digit| n * 10 + u128::from(digit - b'0'));
    let mut scale = fraction.len() as i32;
    let (base, power): (u128, u32) = match suffix {
        "" => (10, 0),
        "k" => (10, 3),
        "M" => (10, 6),
        "G" => (10, 9),
        "T" => (10, 12),
        "P" => (10, 15),
        "E" => (10, 18),
        "Ki" => (1024, 1),
        "Mi" => (1024, 2),
        "Gi" => (1024, 3),
        "Ti" => (1024, 4),
        "Pi" => (1024, 5),
        "Ei" => (1024, 6),
        "m" => return Err(QuantityError::Milli),
        _ => {
            let exponent: i32 = suffix
                .strip_prefix(['e', 'E'])
                .filter(|e| !e.is_empty())
                .and_then(|e| e.parse().ok())
                .ok_or(QuantityError::Invalid)?;
            // Checked: the exponent is anyone's text (an inline spec), and `-i32::MIN` or the
            // sum with the fraction's digits overflows.
            if exponent >= 0 {
                (10, exponent.unsigned_abs())
            } else {
                scale = exponent
                    .checked_neg()
                    .and_then(|e| scale.checked_add(e))
                    .ok_or(QuantityError::Invalid)?;
                (10, 0)
            }
        }
    };
    if mantissa == 0 {
        return Ok(0);
    }
    let multiplier = base.checked_pow(power).ok_or(QuantityError::TooLarge)?;
    let numerator = mantissa
        .checked_mul(multiplier)
        .ok_or(QuantityError::TooLarge)?;
    let bytes = match 10u128.checked_pow(scale as u32) {
        Some(divisor) => numerator.div_ceil(divisor),
        // A divisor beyond u128 leaves a positive fraction of a byte: round up to 1.
        None => 1,
    };
    u64::try_from(bytes).map_err(|_| QuantityError::TooLarge)
}

#[cfg(test)]
mod tests {
    //! Parsing the checks of an ImagePromotion: Kubernetes quantities, valid checks into limits and
    //! requirements, and invalid ones refused with a message naming the field.

    use super::*;

    #[test]
    fn quantities_parse_as_kubernetes_does() {
        for (text, bytes) in [
            ("1200000", 1_200_000),
            ("500M", 500_000_000),
            ("5Gi", 5 * 1024 * 1024 * 1024),
            ("1.5Gi", 1_610_612_736),
            ("1k", 1_000),
            ("64Ki", 65_536),
            ("12e6", 12_000_000),
            ("12E6", 12_000_000),
            ("1E", 1_000_000_000_000_000_000),
            ("+10", 10),
            ("0.5", 1),
            ("1.0001k", 1_001),
            ("15e-1", 2),
            ("1e-40", 1),
            ("0", 0),
            (".5Ki", 512),
        ] {
            assert_eq!(parse_quantity_bytes(text), Ok(bytes), "{text}");
        }
        for (text, error) in [
            ("", QuantityError::Invalid),
            ("5 GB", QuantityError::Invalid),
            ("5GB", QuantityError::Invalid),
            ("-1", QuantityError::Invalid),
            ("Gi", QuantityError::Invalid),
            ("1.2.3", QuantityError::Invalid),
            ("1e", QuantityError::Invalid),
            ("500m", QuantityError::Milli),
            ("20Ei", QuantityError::TooLarge),
            ("1e30", QuantityError::TooLarge),
            // Exponents whose negation or sum overflows an i32 (a panic with overflow checks on).
            ("1e-2147483648", QuantityError::Invalid),
            ("1.5e-2147483647", QuantityError::Invalid),
            ("1e2147483648", QuantityError::Invalid),
            ("1e4294967296", QuantityError::Invalid),
        ] {
            assert_eq!(parse_quantity_bytes(text), Err(error), "{text}");
        }
    }

    #[test]
    fn valid_checks_parse_into_limits_and_requirements() {
        let checks = Checks {
            required_labels: vec!["vcs-ref".into(), "vendor=Red Hat, Inc.".into()],
            allowed_registries: vec!["quay.io/org/".into()],
            allowed_architectures: vec!["amd64".into()],
            allowed_os: vec!["linux".into()],
            max_age: Some("720h".into()),
            max_size: Some("5Gi".into()),
            non_root_user: true,
        };
        let parsed = checks.parse().unwrap();
        assert_eq!(
            parsed.required_labels,
            vec![
                LabelRequirement {
                    key: "vcs-ref".into(),
                    value: None
                },
                LabelRequirement {
                    key: "vendor".into(),
                    value: Some("Red Hat, Inc.".into())
                },
            ]
        );
        assert_eq!(parsed.allowed_registries, vec!["quay.io/org".to_string()]);
        assert_eq!(
            parsed.max_age,
            Some(Limit {
                value: Duration::from_secs(720 * 3600),
                text: "720h".into()
            })
        );
        assert_eq!(
            parsed.max_size,
            Some(Limit {
                value: 5 << 30,
                text: "5Gi".into()
            })
        );
        assert!(parsed.non_root_user);
        assert_eq!(Checks::default().parse().unwrap(), ParsedChecks::default());
    }

    #[test]
    fn invalid_checks_are_refused_with_a_message_naming_the_field() {
        let table: &[(Checks, &str)] = &[
            (
                Checks {
                    max_age: Some("7 days".into()),
                    ..Checks::default()
                },
                r#"checks.maxAge: "7 days" is not a duration (use e.g. "168h")"#,
            ),
            (
                Checks {
                    max_age: Some("0s".into()),
                    ..Checks::default()
                },
                r#"checks.maxAge: "0s" must be greater than zero"#,
            ),
            (
                Checks {
                    max_size: Some("5 GB".into()),
                    ..Checks::default()
                },
                r#"checks.maxSize: "5 GB" is not a quantity (use e.g. "5Gi", "500M" or "1200000")"#,
            ),
            (
                Checks {
                    max_size: Some("500m".into()),
                    ..Checks::default()
                },
                r#"checks.maxSize: "500m" is milli-bytes (the suffix m means 1/1000); use e.g. "500M" or "500Mi""#,
            ),
            (
                Checks {
                    required_labels: vec!["ok".into(), "=value".into()],
                    ..Checks::default()
                },
                r#"checks.requiredLabels[1]: "=value" is not a label requirement (use "key" or "key=value")"#,
            ),
            (
                Checks {
                    allowed_registries: vec!["/".into()],
                    ..Checks::default()
                },
                r#"checks.allowedRegistries[0]: "/" is not a registry or repository prefix (use e.g. "quay.io/org")"#,
            ),
            (
                Checks {
                    allowed_os: vec![" ".into()],
                    ..Checks::default()
                },
                "checks.allowedOS[0]: must not be empty",
            ),
            (
                Checks {
                    max_age: Some("1x".into()),
                    max_size: Some("big".into()),
                    ..Checks::default()
                },
                r#"checks.maxAge: "1x" is not a duration (use e.g. "168h"); checks.maxSize: "big" is not a quantity (use e.g. "5Gi", "500M" or "1200000")"#,
            ),
        ];
        for (checks, message) in table {
            assert_eq!(checks.parse().unwrap_err(), *message);
        }
    }
}
