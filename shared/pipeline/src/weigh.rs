//! A weighted sum of rows, the step the blurs and resamplings of near-duplicate detection
//! share (`crate::points`, `crate::pdq`): each output value a sum over the same few inputs'
//! weights, made many values at a time along memory.

/// `out[i] = Σ_k kernel[k] · input(k)[i]`, each sum made in the order of `k` (so the result
/// is what a pass over `out` per tap gives, bit for bit), `LANES` outputs at a time held in
/// registers: `out` is written once, not read and written once a tap.
pub(crate) fn weigh<'a>(out: &mut [f32], kernel: &[f32], input: impl Fn(usize) -> &'a [f32]) {
    const LANES: usize = 16;
    let whole = out.len() / LANES * LANES;
    for (chunk, o) in out[..whole].chunks_exact_mut(LANES).enumerate() {
        let at = chunk * LANES;
        let mut sums = [0f32; LANES];
        for (k, weight) in kernel.iter().enumerate() {
            for (s, v) in sums.iter_mut().zip(&input(k)[at..at + LANES]) {
                *s += weight * v;
            }
        }
        o.copy_from_slice(&sums);
    }
    for (i, o) in out.iter_mut().enumerate().skip(whole) {
        *o = kernel
            .iter()
            .enumerate()
            .fold(0.0, |s, (k, weight)| s + weight * input(k)[i]);
    }
}
