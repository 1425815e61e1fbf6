//! List prices and the formula that turns a stage's measured counts into dollars per million
//! photos, and the Lambda memory size each stage runs at.

#[cfg(test)]
use super::proxy::Run;
use super::proxy::StageCounts;

/// us-east-1 list prices (arm64 Lambda, DynamoDB on demand, SQS standard, S3 standard).
pub mod price {
    pub const LAMBDA_GB_SECOND: f64 = 0.000_013_333_4;
    pub const LAMBDA_REQUEST: f64 = 0.20 / 1e6;
    pub const DYNAMODB_WRITE_UNIT: f64 = 0.625 / 1e6;
    pub const DYNAMODB_READ_UNIT: f64 = 0.125 / 1e6;
    pub const SQS_REQUEST: f64 = 0.40 / 1e6;
    pub const S3_PUT_CLASS: f64 = 5.0 / 1e6;
    pub const S3_GET_CLASS: f64 = 0.40 / 1e6;
}

/// Lambda gives a function one full vCPU at 1769 MB, and CPU in proportion below that.
const FULL_VCPU_MB: f64 = 1769.0;
/// The sizes considered for each function.
const MEMORY_SIZES: [u32; 5] = [128, 256, 512, 1024, 1769];

/// How a stage's Lambda function is sized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sizing {
    /// The cheapest size that holds twice the measured peak memory.
    Cheapest,
    /// A fixed size (the process function gets a full vCPU: a photo is ready in one decode's
    /// time, and CPU-bound work costs the same per CPU-second at any size up to 1769 MB).
    Fixed(u32),
}

/// One stage's bill for the photos it handled.
#[derive(Debug, Clone, Default)]
pub struct StageBill {
    pub memory_mb: u32,
    pub lambda: f64,
    pub dynamodb: f64,
    pub sqs: f64,
    pub s3_puts: f64,
    pub s3_gets: f64,
}

impl StageBill {
    /// Compute, queues and table: everything but S3 PUTs (the targets count those on top: docs/cost.md).
    pub fn without_puts(&self) -> f64 {
        self.lambda + self.dynamodb + self.sqs + self.s3_gets
    }

    pub fn add(&mut self, other: &StageBill) {
        self.lambda += other.lambda;
        self.dynamodb += other.dynamodb;
        self.sqs += other.sqs;
        self.s3_puts += other.s3_puts;
        self.s3_gets += other.s3_gets;
    }

    pub fn scaled(&self, by: f64) -> StageBill {
        StageBill {
            memory_mb: self.memory_mb,
            lambda: self.lambda * by,
            dynamodb: self.dynamodb * by,
            sqs: self.sqs * by,
            s3_puts: self.s3_puts * by,
            s3_gets: self.s3_gets * by,
        }
    }
}

/// Billed milliseconds of one invocation at `memory_mb`: the wall time, or the CPU time
/// stretched by the smaller CPU share, whichever is longer.
pub fn billed_ms(cpu_ms: f64, wall_ms: f64, memory_mb: u32) -> f64 {
    let share = (f64::from(memory_mb) / FULL_VCPU_MB).min(1.0);
    wall_ms.max(cpu_ms / share).ceil()
}

fn lambda_cost(counts: &StageCounts, memory_mb: u32) -> f64 {
    let gb_seconds: f64 = counts
        .runs
        .iter()
        .map(|r| {
            billed_ms(r.cpu_ms, r.modeled_ms, memory_mb) / 1000.0 * f64::from(memory_mb) / 1024.0
        })
        .sum();
    counts.invocations as f64 * price::LAMBDA_REQUEST + gb_seconds * price::LAMBDA_GB_SECOND
}

/// The stage's bill in dollars, for everything it counted.
pub fn bill(counts: &StageCounts, sizing: Sizing) -> StageBill {
    let memory_mb = match sizing {
        Sizing::Fixed(mb) => mb,
        Sizing::Cheapest => MEMORY_SIZES
            .into_iter()
            .filter(|mb| f64::from(*mb) >= 2.0 * counts.peak_rss_mb)
            .min_by(|a, b| lambda_cost(counts, *a).total_cmp(&lambda_cost(counts, *b)))
            .unwrap_or(1769),
    };
    StageBill {
        memory_mb,
        lambda: if counts.invocations == 0 {
            0.0
        } else {
            lambda_cost(counts, memory_mb)
        },
        dynamodb: counts.write_units * price::DYNAMODB_WRITE_UNIT
            + counts.read_units * price::DYNAMODB_READ_UNIT,
        sqs: counts.sqs_requests as f64 * price::SQS_REQUEST,
        s3_puts: counts.s3_put_class as f64 * price::S3_PUT_CLASS,
        s3_gets: counts.s3_get_class as f64 * price::S3_GET_CLASS,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_stretches_below_a_full_vcpu() {
        assert_eq!(billed_ms(10.0, 50.0, 1769), 50.0);
        assert_eq!(
            billed_ms(10.0, 50.0, 128),
            (10.0 * 1769.0 / 128.0_f64).ceil()
        );
    }

    #[test]
    fn the_cheapest_size_holds_twice_the_peak_memory() {
        let counts = StageCounts {
            invocations: 1,
            runs: vec![Run {
                cpu_ms: 1.0,
                measured_ms: 300.0,
                modeled_ms: 100.0,
                ..Run::default()
            }],
            peak_rss_mb: 100.0,
            ..StageCounts::default()
        };
        assert_eq!(bill(&counts, Sizing::Cheapest).memory_mb, 256);
        assert_eq!(bill(&counts, Sizing::Fixed(1769)).memory_mb, 1769);
    }

    #[test]
    fn a_million_write_units_cost_the_list_price() {
        let counts = StageCounts {
            write_units: 1e6,
            ..StageCounts::default()
        };
        let b = bill(&counts, Sizing::Cheapest);
        assert!((b.dynamodb - 0.625).abs() < 1e-9);
        assert_eq!(b.lambda, 0.0);
    }
}
