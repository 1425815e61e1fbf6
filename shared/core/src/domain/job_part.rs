//! One of several runs of garbage collection side by side (`GcParts`). Image ids are MD5 hex,
//! so their first digit spreads them evenly over 16 values; a part takes the ids whose first
//! digit, modulo the number of parts, is its index. The parts cover every id once and never
//! meet, so they need no coordination, and on DynamoDB each reads only its own GC-index buckets
//! (those of its first digits).

use std::fmt;

use super::ImageId;

/// The most parts a job splits into: one per first hex digit.
pub const MAX_JOB_PARTS: u8 = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct JobPart {
    index: u8,
    of: u8,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "a job part is an index below the number of parts, 1 to {MAX_JOB_PARTS}: got part {index} of {of}"
)]
pub struct JobPartError {
    index: u64,
    of: u64,
}

impl JobPart {
    /// The whole job: one run takes every id.
    pub const WHOLE: JobPart = JobPart { index: 0, of: 1 };

    /// Part `index` (from 0) of `of`.
    pub fn new(index: u64, of: u64) -> Result<Self, JobPartError> {
        match (u8::try_from(index), u8::try_from(of)) {
            (Ok(i), Ok(n)) if (1..=MAX_JOB_PARTS).contains(&n) && i < n => {
                Ok(Self { index: i, of: n })
            }
            _ => Err(JobPartError { index, of }),
        }
    }

    pub fn index(&self) -> u8 {
        self.index
    }

    pub fn of(&self) -> u8 {
        self.of
    }

    /// Whether ids starting with hex digit `digit` (0 to 15) are this part's.
    pub fn holds_digit(&self, digit: u8) -> bool {
        digit % self.of == self.index
    }

    /// Whether `id` is this part's.
    pub fn holds(&self, id: &ImageId) -> bool {
        let first = id.as_str().as_bytes().first().copied().unwrap_or(b'0');
        let digit = (first as char).to_digit(16).unwrap_or(0) as u8;
        self.holds_digit(digit)
    }

    /// The first hex digits of this part's ids, lowercase, in order.
    pub fn digits(&self) -> impl Iterator<Item = char> + '_ {
        (0..16u8)
            .filter(|d| self.holds_digit(*d))
            .filter_map(|d| char::from_digit(u32::from(d), 16))
    }
}

impl fmt::Display for JobPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "part {} of {}", self.index, self.of)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parts_of_a_job_cover_every_first_digit_once() {
        for of in 1..=u64::from(MAX_JOB_PARTS) {
            let mut seen = Vec::new();
            for index in 0..of {
                seen.extend(JobPart::new(index, of).unwrap().digits());
            }
            seen.sort_unstable();
            let all: Vec<char> = "0123456789abcdef".chars().collect();
            assert_eq!(seen, all, "{of} parts");
        }
    }

    #[test]
    fn an_id_belongs_to_the_part_of_its_first_digit() {
        let id = ImageId::parse("c0ffee00000000000000000000000000").unwrap();
        assert!(JobPart::WHOLE.holds(&id));
        // c is 12: 12 % 8 = 4, 12 % 5 = 2.
        assert!(JobPart::new(4, 8).unwrap().holds(&id));
        assert!(!JobPart::new(3, 8).unwrap().holds(&id));
        assert!(JobPart::new(2, 5).unwrap().holds(&id));
    }

    #[test]
    fn parts_outside_the_job_are_refused() {
        for (index, of) in [
            (0, 0),
            (1, 1),
            (16, 16),
            (0, 17),
            (u64::MAX, 4),
            (3, u64::MAX),
        ] {
            let e = JobPart::new(index, of).unwrap_err();
            assert!(e.to_string().contains("1 to 16"), "{e}");
        }
    }
}
