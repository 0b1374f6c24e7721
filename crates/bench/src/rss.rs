//! Process memory and machine facts from `/proc`, for reports.
//!
//! Everything here is best effort: on a system without `/proc` (or with an unexpected
//! format) the values are `None` / "unknown" rather than errors, since a benchmark should
//! still run and report throughput there.

use std::time::{SystemTime, UNIX_EPOCH};

/// Peak resident set size of this process in bytes (`VmHWM` in `/proc/self/status`).
pub fn peak_rss_bytes() -> Option<u64> {
    status_kib("VmHWM:").map(|kib| kib * 1024)
}

/// Current resident set size in bytes (`VmRSS`).
pub fn current_rss_bytes() -> Option<u64> {
    status_kib("VmRSS:").map(|kib| kib * 1024)
}

fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_kib_field(&status, field)
}

/// The value of a "Name:   1234 kB" line.
fn parse_kib_field(text: &str, field: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(field))?;
    line[field.len()..].split_whitespace().next()?.parse().ok()
}

/// Memory the kernel says is available for new allocations (`MemAvailable`), in bytes.
pub fn mem_available_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_kib_field(&meminfo, "MemAvailable:").map(|kib| kib * 1024)
}

/// Facts about the machine a run happened on, for the JSON report.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Machine {
    /// `model name` from `/proc/cpuinfo`.
    pub cpu_model: String,
    /// Logical CPUs this process may run on.
    pub cores: usize,
    /// Kernel release (`/proc/sys/kernel/osrelease`).
    pub kernel: String,
    /// Whether the CPU advertises an invariant TSC (what RDTSC timestamps need).
    pub tsc_invariant: bool,
    /// Seconds since the Unix epoch when the report was made.
    pub unix_time: u64,
    /// The same instant as an ISO 8601 UTC date-time.
    pub date_utc: String,
}

impl Machine {
    /// Reads the machine's facts now.
    pub fn detect() -> Self {
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|c| {
                c.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".into());
        let unix_time = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Machine {
            cpu_model,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            kernel,
            tsc_invariant: verso_engine::tsc_is_invariant(),
            unix_time,
            date_utc: iso8601_utc(unix_time),
        }
    }
}

/// Formats Unix seconds as `YYYY-MM-DDTHH:MM:SSZ` (proleptic Gregorian, UTC), so the
/// harness needs no date library.
pub fn iso8601_utc(unix: u64) -> String {
    let days = (unix / 86_400) as i64;
    let secs = unix % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_format_correctly() {
        assert_eq!(iso8601_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(iso8601_utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(iso8601_utc(1_700_000_000), "2023-11-14T22:13:20Z");
    }

    #[test]
    fn kib_fields_parse() {
        let text = "Name:\tverso\nVmPeak:\t  2000 kB\nVmHWM:\t  1234 kB\n";
        assert_eq!(parse_kib_field(text, "VmHWM:"), Some(1234));
        assert_eq!(parse_kib_field(text, "VmRSS:"), None);
    }

    #[test]
    fn this_process_has_a_peak_rss_on_linux() {
        if cfg!(target_os = "linux") {
            let peak = peak_rss_bytes().expect("VmHWM readable");
            assert!(peak > 0);
            assert!(peak >= current_rss_bytes().unwrap_or(0) / 2);
        }
    }
}
