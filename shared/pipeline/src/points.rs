//! A photo's points (`imgest_core::domain::Point`): its strongest corners in its luma averaged
//! down to [`POINT_SIDE`] pixels on the short side (Harris' measure, each a local maximum over
//! 7x7 pixels, placed to a fraction of a pixel), each with a 64-bit descriptor of the 20x20
//! patch around it. A stored photo's are found at that one scale, from the luma its signature
//! is made of (no second decode); a lookup's at each of [`QUERY_SCALES`].

use crate::weigh::weigh;
use imgest_core::domain::{
    POINT_KEY_BITS as KEY_BITS, POINT_SIDE, Point, QUERY_POINTS, QUERY_SCALES, QueryLevel,
    QueryPoints, STORED_POINTS,
};

/// The patch a descriptor describes reaches this far from its point, in pixels.
const PATCH_RADIUS: f32 = 10.0;
/// Points this close to an edge (a share of the short side, then the patch) are not kept: a
/// copy's edge (a crop's, a border's) changes what the patch holds.
const EDGE_SHARE: f32 = 0.06;
/// Harris' measure: the smoothing of the picture its gradients are taken of, the window they
/// are summed over, and its constant.
const GRADIENT_SIGMA: f32 = 1.0;
const WINDOW_SIGMA: f32 = 2.0;
const HARRIS_K: f32 = 0.05;
/// A corner is the largest measure within this many pixels of it.
const PEAK_RADIUS: usize = 3;
/// The smoothing of the picture descriptors sample.
const PATCH_SIGMA: f32 = 0.7;
/// A descriptor is a plain edge or corner when at most this many of its rows and columns
/// cross the median more than once: a half or a quadrant of the patch bright, its boundary
/// straight or curved, at any angle. Such patches are common to a great many photos (on the
/// benchmark's 2,057, the five busiest keys were all edges, the busiest 7 % of the photos): a
/// plain point is passed over, for what it would match and for the index key it would crowd.
const MAX_CROSSED_LINES: u32 = 4;

/// Whether `descriptor` (bit `row * 8 + column`) is a plain edge or corner.
fn is_plain(descriptor: u64) -> bool {
    let row = |r: u32| (descriptor >> (8 * r)) as u8;
    let column = |c: u32| {
        (0..8).fold(0u8, |v, r| {
            v | (((descriptor >> (8 * r + c)) & 1) as u8) << r
        })
    };
    let crosses = |line: u8| ((line ^ (line >> 1)) & 0x7f).count_ones() > 1;
    let crossed = (0..8).filter(|&i| crosses(row(i))).count()
        + (0..8).filter(|&i| crosses(column(i))).count();
    crossed as u32 <= MAX_CROSSED_LINES
}

/// A picture with a short side below this is not worth finding points in (it is smaller than
/// the patches).
const MIN_SIDE: usize = 64;

/// A stored photo's points, from its luma (`width` x `height`, row by row, at least
/// [`POINT_SIDE`] on the short side for its points to be comparable): strongest first.
pub(crate) fn stored(luma: &[f32], width: usize, height: usize, work: &mut Work) -> Vec<Point> {
    let Some(picture) = Picture::at_side(luma, width, height, POINT_SIDE, work) else {
        return Vec::new();
    };
    let points = picture.points(STORED_POINTS, work);
    work.give(picture.luma);
    points.into_iter().map(|(p, _)| p).collect()
}

/// A lookup's points, at each of [`QUERY_SCALES`].
pub(crate) fn query(luma: &[f32], width: usize, height: usize) -> QueryPoints {
    let mut work = Work::default();
    QueryPoints(
        QUERY_SCALES
            .iter()
            .filter_map(|&scale| {
                let picture = Picture::at_side(luma, width, height, POINT_SIDE * scale, &mut work)?;
                let level = QueryLevel {
                    width: picture.width as f32,
                    height: picture.height as f32,
                    points: picture.points(QUERY_POINTS, &mut work),
                };
                work.give(picture.luma);
                Some(level)
            })
            .collect(),
    )
}

/// The float buffers a signature takes (its averaged luma, and a dozen the size of the picture
/// points are found in), kept from one use to the next: a process's photos reuse them through
/// the pipeline's scratch (`crate::scratch`), where fresh ones would page-fault in again for
/// each photo. At most [`Work::MAX_BYTES`] are kept.
#[derive(Debug, Default)]
pub(crate) struct Work {
    kept: Vec<Vec<f32>>,
}

impl Work {
    /// A stored photo's points from a 16:9 picture hold about 1.4 MB (228x128 floats, a dozen
    /// buffers); a much wider one's are partly freed.
    const MAX_BYTES: usize = 2 << 20;

    /// `len` zeros, in a kept buffer when one holds them.
    pub(crate) fn zeros(&mut self, len: usize) -> Vec<f32> {
        let mut buffer = self.empty(len);
        buffer.resize(len, 0.0);
        buffer
    }

    /// A copy of `values`, in a kept buffer when one holds them.
    fn copy_of(&mut self, values: &[f32]) -> Vec<f32> {
        let mut buffer = self.empty(values.len());
        buffer.extend_from_slice(values);
        buffer
    }

    /// An empty buffer, a kept one that holds `len` values if there is one.
    pub(crate) fn empty(&mut self, len: usize) -> Vec<f32> {
        let mut buffer = match self.kept.iter().position(|b| b.capacity() >= len) {
            Some(i) => self.kept.swap_remove(i),
            None => self.kept.pop().unwrap_or_default(),
        };
        buffer.clear();
        buffer
    }

    /// Keeps `buffer` for a later [`Self::zeros`], unless that would keep more than
    /// [`Self::MAX_BYTES`].
    pub(crate) fn give(&mut self, buffer: Vec<f32>) {
        let bytes = |b: &Vec<f32>| b.capacity() * size_of::<f32>();
        if self.kept.iter().map(bytes).sum::<usize>() + bytes(&buffer) <= Self::MAX_BYTES {
            self.kept.push(buffer);
        }
    }
}

/// Luma at the scale points are found at.
struct Picture {
    luma: Vec<f32>,
    width: usize,
    height: usize,
}

impl Picture {
    /// `luma` resampled to `side` pixels on its short side (a triangle filter as wide as the
    /// step, as a bilinear resize with antialiasing); `None` for a picture too small.
    fn at_side(
        luma: &[f32],
        width: usize,
        height: usize,
        side: f32,
        work: &mut Work,
    ) -> Option<Self> {
        if width.min(height) < MIN_SIDE || luma.len() < width * height {
            return None;
        }
        let f = side / width.min(height) as f32;
        let (w, h) = (
            ((width as f32 * f).round() as usize).max(1),
            ((height as f32 * f).round() as usize).max(1),
        );
        let rows = resample_rows(luma, width, height, w, work);
        let luma = resample_columns(&rows, w, height, h, work);
        work.give(rows);
        Some(Self {
            luma,
            width: w,
            height: h,
        })
    }

    /// The `k` strongest corners, each with its descriptor and its weakest key bit's place.
    fn points(&self, k: usize, work: &mut Work) -> Vec<(Point, u8)> {
        let (w, h) = (self.width, self.height);
        let margin = (EDGE_SHARE * w.min(h) as f32) as usize + PATCH_RADIUS as usize + 1;
        if w <= 2 * margin || h <= 2 * margin {
            return Vec::new();
        }
        // Where points may be, and what each step reads around them: the values outside are
        // never read, so they are not computed.
        let peaks_area = Area::inside(w, h, margin);
        let response = self.harris(peaks_area.grown(PEAK_RADIUS, w, h), work);
        let at = |x: usize, y: usize| response[y * w + x];
        let largest = window_max(&response, w, h, PEAK_RADIUS, peaks_area, work);
        let mut peaks: Vec<(f32, usize, usize)> = Vec::new();
        for y in margin..h - margin {
            for x in margin..w - margin {
                let v = at(x, y);
                if v > 0.0 && v >= largest[y * w + x] {
                    peaks.push((v, x, y));
                }
            }
        }
        peaks.sort_by(|a, b| b.0.total_cmp(&a.0).then((a.2, a.1).cmp(&(b.2, b.1))));
        // A descriptor's samples reach `PATCH_RADIUS` from its point, and a pixel beyond.
        let patch_area = peaks_area.grown(PATCH_RADIUS as usize + 2, w, h);
        work.give(largest);
        let patches = blur(&self.luma, w, h, PATCH_SIGMA, patch_area, work);
        let points = peaks
            .into_iter()
            .filter_map(|(v, x, y)| {
                // The peak's place to a fraction of a pixel: a parabola through its neighbours.
                let offset = |before: f32, after: f32| {
                    let curve = 2.0 * (2.0 * v - before - after);
                    ((after - before) / (curve + 1e-9)).clamp(-0.5, 0.5)
                };
                let px = x as f32 + offset(at(x - 1, y), at(x + 1, y));
                let py = y as f32 + offset(at(x, y - 1), at(x, y + 1));
                let (descriptor, weak) = describe(&patches, w, h, px, py);
                (!is_plain(descriptor))
                    .then(|| Point::at(descriptor, px, py).map(|p| (p, weak)))
                    .flatten()
            })
            .take(k)
            .collect();
        work.give(patches);
        work.give(response);
        points
    }

    /// Harris' measure at each pixel of `area` (0 elsewhere).
    fn harris(&self, area: Area, work: &mut Work) -> Vec<f32> {
        let (w, h) = (self.width, self.height);
        // The window's blur reads the gradients' products this far around `area`, and they
        // read the smoothed picture a pixel further.
        let products = area.grown(radius(WINDOW_SIGMA), w, h);
        let smooth = blur(
            &self.luma,
            w,
            h,
            GRADIENT_SIGMA,
            products.grown(1, w, h),
            work,
        );
        let (mut xx, mut yy, mut xy) = (work.zeros(w * h), work.zeros(w * h), work.zeros(w * h));
        let mut gx = vec![0f32; w];
        // Central differences, one-sided at the edges; row by row, so the inner loops run
        // along memory.
        for y in products.rows() {
            let (y0, y1) = (y.saturating_sub(1), (y + 1).min(h - 1));
            let vertical = 1.0 / (y1 - y0).max(1) as f32;
            let (above, row, below) = (
                &smooth[y0 * w..(y0 + 1) * w],
                &smooth[y * w..(y + 1) * w],
                &smooth[y1 * w..(y1 + 1) * w],
            );
            let (xx, yy, xy) = (
                &mut xx[y * w..(y + 1) * w],
                &mut yy[y * w..(y + 1) * w],
                &mut xy[y * w..(y + 1) * w],
            );
            // The horizontal differences: central inside, one-sided at the two ends.
            gx[0] = row[1] - row[0];
            gx[w - 1] = row[w - 1] - row[w - 2];
            for (g, (before, after)) in gx[1..w - 1].iter_mut().zip(row.iter().zip(&row[2..])) {
                *g = (after - before) * 0.5;
            }
            for (x, &gx) in gx.iter().enumerate() {
                let gy = (below[x] - above[x]) * vertical;
                xx[x] = gx * gx;
                yy[x] = gy * gy;
                xy[x] = gx * gy;
            }
        }
        work.give(smooth);
        let mut summed = |products: Vec<f32>| {
            let blurred = blur(&products, w, h, WINDOW_SIGMA, area, work);
            work.give(products);
            blurred
        };
        let (xx, yy, xy) = (summed(xx), summed(yy), summed(xy));
        let mut response = work.zeros(w * h);
        for (r, ((a, b), c)) in response.iter_mut().zip(xx.iter().zip(&yy).zip(&xy)) {
            *r = a * b - c * c - HARRIS_K * (a + b) * (a + b);
        }
        [xx, yy, xy].into_iter().for_each(|b| work.give(b));
        response
    }
}

/// The descriptor of the patch around `(x, y)`: 16x16 samples over the patch (bilinear),
/// averaged in 2x2 into 8x8 cells, bit `row * 8 + column` set when the cell is above the cells'
/// median; and the place in the key of the key bit whose cell is nearest the median.
fn describe(picture: &[f32], w: usize, h: usize, x: f32, y: f32) -> (u64, u8) {
    // The samples lie on a grid: each column's two pixels and weight, and each row's, are
    // found once (a sample is then four reads and three blends).
    let step = 2.0 * PATCH_RADIUS / 16.0;
    let along = |centre: f32, len: usize| {
        std::array::from_fn::<_, 16, _>(|i| {
            let s = (centre - PATCH_RADIUS + (i as f32 + 0.5) * step).clamp(0.0, (len - 1) as f32);
            let first = s.floor() as usize;
            (first, (first + 1).min(len - 1), s - first as f32)
        })
    };
    let (columns, rows) = (along(x, w), along(y, h));
    let mut cells = [0f32; 64];
    for (sy, &(y0, y1, fy)) in rows.iter().enumerate() {
        let (above, below) = (
            &picture[y0 * w..(y0 + 1) * w],
            &picture[y1 * w..(y1 + 1) * w],
        );
        for (sx, &(x0, x1, fx)) in columns.iter().enumerate() {
            let row = |line: &[f32]| line[x0] * (1.0 - fx) + line[x1] * fx;
            let v = row(above) * (1.0 - fy) + row(below) * fy;
            cells[(sy / 2) * 8 + sx / 2] += v * 0.25;
        }
    }
    // The median of the 64: the 33rd smallest and the largest of the 32 below it.
    let mut order = cells;
    let (below, upper, _) = order.select_nth_unstable_by(32, f32::total_cmp);
    let lower = below.iter().copied().fold(f32::MIN, f32::max);
    let median = (lower + *upper) / 2.0;
    let descriptor = cells
        .iter()
        .enumerate()
        .fold(0u64, |d, (i, &c)| if c > median { d | 1 << i } else { d });
    let weak = KEY_BITS
        .iter()
        .enumerate()
        .min_by(|a, b| {
            let gap = |bit: u8| (cells[usize::from(bit)] - median).abs();
            gap(*a.1).total_cmp(&gap(*b.1))
        })
        .map_or(0, |(i, _)| i as u8);
    (descriptor, weak)
}

/// Each output value's first input and its weights, for `width` values resampled to `out` (a
/// triangle filter stretched by the step when shrinking).
fn taps(width: usize, out: usize) -> Vec<(usize, Vec<f32>)> {
    let scale = width as f32 / out as f32;
    let stretch = scale.max(1.0);
    let support = stretch;
    (0..out)
        .map(|i| {
            let centre = (i as f32 + 0.5) * scale;
            let first = ((centre - support + 0.5).floor().max(0.0)) as usize;
            let last = ((centre + support + 0.5).floor() as usize).min(width);
            let mut weights: Vec<f32> = (first..last)
                .map(|j| (1.0 - ((j as f32 + 0.5 - centre) / stretch).abs()).max(0.0))
                .collect();
            let total: f32 = weights.iter().sum();
            if total > 0.0 {
                weights.iter_mut().for_each(|w| *w /= total);
            }
            (first, weights)
        })
        .collect()
}

/// Each row of `src` (`width` x `height`) resampled to `out` values.
fn resample_rows(
    src: &[f32],
    width: usize,
    height: usize,
    out: usize,
    work: &mut Work,
) -> Vec<f32> {
    let taps = taps(width, out);
    let mut dst = work.zeros(out * height);
    for (row, dst) in src.chunks_exact(width).zip(dst.chunks_exact_mut(out)) {
        for (o, (first, weights)) in dst.iter_mut().zip(&taps) {
            let values = row.get(*first..*first + weights.len()).unwrap_or_default();
            *o = values.iter().zip(weights).map(|(v, w)| v * w).sum();
        }
    }
    dst
}

/// Each column of `src` (`width` x `height`) resampled to `out` values: whole rows weighed
/// (along memory).
fn resample_columns(
    src: &[f32],
    width: usize,
    height: usize,
    out: usize,
    work: &mut Work,
) -> Vec<f32> {
    let mut dst = work.zeros(width * out);
    for ((first, weights), o) in taps(height, out).iter().zip(dst.chunks_exact_mut(width)) {
        weigh(o, weights, |k| {
            &src[(first + k) * width..(first + k + 1) * width]
        });
    }
    dst
}

/// How far a Gaussian blur of `sigma` reaches: three sigmas.
fn radius(sigma: f32) -> usize {
    (3.0 * sigma).ceil() as usize
}

/// The rows `y0..y1` and columns `x0..x1` of a picture a step's values are needed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Area {
    x0: usize,
    y0: usize,
    x1: usize,
    y1: usize,
}

impl Area {
    /// A `w` x `h` picture less `margin` pixels on each side.
    fn inside(w: usize, h: usize, margin: usize) -> Self {
        Self {
            x0: margin.min(w),
            y0: margin.min(h),
            x1: w.saturating_sub(margin),
            y1: h.saturating_sub(margin),
        }
    }

    /// The area with `by` pixels more on each side, within the `w` x `h` picture.
    fn grown(self, by: usize, w: usize, h: usize) -> Self {
        Self {
            x0: self.x0.saturating_sub(by),
            y0: self.y0.saturating_sub(by),
            x1: (self.x1 + by).min(w),
            y1: (self.y1 + by).min(h),
        }
    }

    fn rows(&self) -> std::ops::Range<usize> {
        self.y0..self.y1
    }

    fn columns(&self) -> std::ops::Range<usize> {
        self.x0..self.x1
    }
}

/// A Gaussian blur (separable, to three sigmas, the edges mirrored), computed in `area` (0
/// elsewhere): each value there is what blurring the whole picture gives, bit for bit.
fn blur(src: &[f32], w: usize, h: usize, sigma: f32, area: Area, work: &mut Work) -> Vec<f32> {
    let radius = radius(sigma);
    let kernel: Vec<f32> = {
        let k: Vec<f32> = (0..=2 * radius)
            .map(|i| {
                let d = i as f32 - radius as f32;
                (-(d * d) / (2.0 * sigma * sigma)).exp()
            })
            .collect();
        let total: f32 = k.iter().sum();
        k.into_iter().map(|v| v / total).collect()
    };
    let columns = area.columns();
    // Rows: each copied once with its mirrored ends, then weighed along it; only the rows the
    // column pass reads (`area`'s and `radius` around them: mirrored ones fall among those).
    let mut rows = work.zeros(w * h);
    let mut padded = vec![0f32; w + 2 * radius];
    for y in area.grown(radius, w, h).rows() {
        let (row, out) = (&src[y * w..(y + 1) * w], &mut rows[y * w..(y + 1) * w]);
        // The middle copied as it is; only the ends are reflected.
        padded[radius..radius + w].copy_from_slice(row);
        for i in 0..radius {
            padded[i] = row[mirror(i as isize - radius as isize, w)];
            padded[radius + w + i] = row[mirror((w + i) as isize, w)];
        }
        weigh(&mut out[columns.clone()], &kernel, |k| {
            &padded[k + columns.start..k + columns.end]
        });
    }
    // Columns: the rows each output row is weighed from (along memory, where a column at a
    // time strides across it).
    let mut out = work.zeros(w * h);
    let mut taps = Vec::with_capacity(kernel.len());
    for y in area.rows() {
        taps.clear();
        taps.extend((0..kernel.len()).map(|k| {
            let from = mirror(y as isize + k as isize - radius as isize, h) * w;
            &rows[from + columns.start..from + columns.end]
        }));
        weigh(
            &mut out[y * w + columns.start..y * w + columns.end],
            &kernel,
            |k| taps[k],
        );
    }
    drop(taps);
    work.give(rows);
    out
}

/// Index `i` reflected into `0..n` (`-1` is `0`, `n` is `n - 1`).
fn mirror(i: isize, n: usize) -> usize {
    let n = n as isize;
    let mut i = i;
    while i < 0 || i >= n {
        i = if i < 0 { -i - 1 } else { 2 * n - i - 1 };
    }
    i as usize
}

/// The largest value within `r` pixels of each in `area` (a square window, cut at the
/// picture's edges; values outside `area` are not to be read): a row pass and a column pass,
/// each taking the larger of a value and its neighbour `d` away for every `d` up to `r` (whole
/// rows at once: the loops vectorise).
fn window_max(src: &[f32], w: usize, h: usize, r: usize, area: Area, work: &mut Work) -> Vec<f32> {
    let larger = |o: &mut f32, v: f32| *o = if v > *o { v } else { *o };
    let mut rows = work.copy_of(&src[..w * h]);
    for y in area.grown(r, w, h).rows() {
        let (row, out) = (&src[y * w..(y + 1) * w], &mut rows[y * w..(y + 1) * w]);
        for d in 1..=r.min(w.saturating_sub(1)) {
            for (o, &v) in out[..w - d].iter_mut().zip(&row[d..]) {
                larger(o, v);
            }
            for (o, &v) in out[d..].iter_mut().zip(&row[..w - d]) {
                larger(o, v);
            }
        }
    }
    let mut out = work.copy_of(&rows);
    for y in area.rows() {
        for yy in y.saturating_sub(r)..(y + r + 1).min(h) {
            if yy == y {
                continue;
            }
            for (o, &v) in out[y * w..(y + 1) * w]
                .iter_mut()
                .zip(&rows[yy * w..(yy + 1) * w])
            {
                larger(o, v);
            }
        }
    }
    work.give(rows);
    out
}

#[cfg(test)]
mod tests {
    use image::{Rgb, RgbImage, imageops};
    use imgest_core::domain::{MIN_AGREEING, agreeing};

    use crate::signature::{of_rgb, query_points};

    /// A scene of overlapping rectangles of many greys on a gradient (corners everywhere),
    /// different for each seed.
    fn scene(seed: u32, w: u32, h: u32) -> RgbImage {
        let mut state = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
        let mut next = move |n: u32| {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (state >> 8) % n.max(1)
        };
        let mut out = RgbImage::from_fn(w, h, |x, y| {
            let v = (60 + x * 80 / w + y * 60 / h) as u8;
            Rgb([v, v, v])
        });
        for _ in 0..60 {
            let (rw, rh) = (w / 20 + next(w / 8), h / 20 + next(h / 8));
            let (x0, y0) = (next(w - rw), next(h - rh));
            let grey = next(256) as u8;
            let colour = Rgb([grey, grey.wrapping_add(next(40) as u8), grey / 2]);
            for y in y0..y0 + rh {
                for x in x0..x0 + rw {
                    out.put_pixel(x, y, colour);
                }
            }
        }
        out
    }

    /// `share` of each side cut, `left` and `top` of it from the left and top.
    fn cropped(image: &RgbImage, share: f32, left: f32, top: f32) -> RgbImage {
        let (w, h) = image.dimensions();
        let (cw, ch) = ((w as f32 * share) as u32, (h as f32 * share) as u32);
        let (x, y) = ((cw as f32 * left) as u32, (ch as f32 * top) as u32);
        imageops::crop_imm(image, x, y, w - cw, h - ch).to_image()
    }

    fn agree(query: &RgbImage, stored: &RgbImage) -> usize {
        let stored = of_rgb(stored).unwrap();
        agreeing(&query_points(query), stored.points()).points
    }

    #[test]
    fn a_plain_edge_or_corner_is_told_from_a_junction_or_a_texture() {
        use super::is_plain;
        // Bit `row * 8 + column`: a row is a byte, its lowest bit the first column.
        let grid = |rows: [&str; 8]| {
            rows.iter().enumerate().fold(0u64, |d, (r, row)| {
                row.chars().enumerate().fold(
                    d,
                    |d, (c, ch)| if ch == '#' { d | 1 << (8 * r + c) } else { d },
                )
            })
        };
        let plain = [
            // A quadrant, a half, a diagonal edge, a wavering edge.
            0x0f0f_0f0f_0000_0000,
            0xffff_ffff_0000_0000,
            grid([
                "########", "#######.", "######..", "#####...", "####....", "###.....", "##......",
                "#.......",
            ]),
            grid([
                "####....", "####....", "#####...", "####.#..", "###.....", "###.....", "####....",
                "####....",
            ]),
        ];
        for d in plain {
            assert!(is_plain(d), "{d:016x}");
        }
        let not_plain = [
            // A bar crossing the patch, a T junction, a checkerboard, a spot.
            grid([
                "........", "........", "........", "########", "########", "........", "........",
                "........",
            ]),
            grid([
                "########", "########", "...##...", "...##...", "...##...", "...##...", "...##...",
                "...##...",
            ]),
            0x55aa_55aa_55aa_55aa,
            grid([
                "........", "..####..", ".######.", ".######.", ".######.", ".######.", "..####..",
                "........",
            ]),
        ];
        for d in not_plain {
            assert!(!is_plain(d), "{d:016x}");
        }
    }

    #[test]
    fn a_crop_and_its_original_find_each_other_by_their_points() {
        for (seed, (w, h)) in [(1, (480, 360)), (2, (360, 480)), (3, (1024, 576))] {
            let original = scene(seed, w, h);
            let points = of_rgb(&original).unwrap().points.unwrap();
            assert!(points.len() >= 12, "seed {seed}: {} points", points.len());
            for (share, left, top) in [(0.05, 0.5, 0.2), (0.1, 0.8, 0.3), (0.2, 0.1, 0.9)] {
                let crop = cropped(&original, share, left, top);
                let found = agree(&crop, &original);
                assert!(
                    found >= MIN_AGREEING,
                    "seed {seed}, {share}: crop finds {found}"
                );
                let found = agree(&original, &crop);
                assert!(
                    found >= MIN_AGREEING,
                    "seed {seed}, {share}: original finds {found}"
                );
            }
            // Another scene: nothing agrees.
            let other = scene(seed + 10, w, h);
            assert_eq!(agree(&other, &original), 0, "seed {seed}");
            assert_eq!(agree(&cropped(&other, 0.1, 0.5, 0.5), &original), 0);
        }
    }

    #[test]
    fn buffers_kept_from_other_pictures_change_no_point() {
        // Wider, narrower and the same shape, one after another through the same buffers.
        let mut work = super::Work::default();
        for (seed, (w, h)) in [
            (4, (1024, 576)),
            (5, (360, 480)),
            (6, (480, 360)),
            (7, (480, 360)),
        ] {
            let picture = scene(seed, w, h);
            let fresh = of_rgb(&picture).unwrap();
            let kept = crate::signature::of_rgb_with(&picture, &mut work).unwrap();
            assert!(!fresh.points.as_ref().unwrap().is_empty(), "seed {seed}");
            assert_eq!(fresh, kept, "seed {seed}");
        }
        assert!(!work.kept.is_empty(), "the buffers were kept");
    }

    /// Where [`logo`] stamps: a fifth of the width, an eighth of the height, inside the
    /// picture (a corner's would be in the edge points are not found in).
    fn logo_box(w: u32, h: u32) -> (u32, u32, u32, u32) {
        (w * 3 / 5, h * 3 / 5, w / 5, h / 8)
    }

    /// `image` with a dealer's logo: a dense block of strokes, the strongest corners of a
    /// smooth photo.
    fn logo(image: &RgbImage) -> RgbImage {
        let mut out = image.clone();
        let (w, h) = image.dimensions();
        let (x0, y0, bw, bh) = logo_box(w, h);
        for y in y0..y0 + bh {
            for x in x0..x0 + bw {
                let stroke = ((x - x0) / 6 + (y - y0) / 9) % 3 == 0 && (y - y0) % 11 > 2;
                out.put_pixel(
                    x,
                    y,
                    if stroke {
                        Rgb([10, 10, 10])
                    } else {
                        Rgb([245, 245, 245])
                    },
                );
            }
        }
        out
    }

    #[test]
    fn two_photos_with_the_same_logo_in_the_same_place_are_not_one_picture() {
        // Smooth photos (gradients of their own, in other directions: no corners), so the
        // logo's are their points.
        let smooth = |seed: u32| {
            let (a, b) = if seed == 1 { (0.3, 0.2) } else { (-0.25, 0.1) };
            RgbImage::from_fn(480, 360, |x, y| {
                let v = (120.0 + a * (x as f32 - 240.0) + b * (y as f32 - 180.0)) as u8;
                Rgb([v, v / 2 + 40, 255 - v])
            })
        };
        let (a, b) = (logo(&smooth(1)), logo(&smooth(2)));
        let stored = of_rgb(&b).unwrap();
        // Most of the points are the logo's: they match, on one offset.
        let (x0, y0, bw, bh) = logo_box(480, 360);
        let scale = 128.0 / 360.0;
        let on_logo = stored
            .points()
            .iter()
            .filter(|p| {
                let (x, y) = (p.x_px() / scale, p.y_px() / scale);
                (x0 as f32..(x0 + bw) as f32).contains(&x)
                    && (y0 as f32..(y0 + bh) as f32).contains(&y)
            })
            .count();
        assert!(on_logo >= MIN_AGREEING, "{on_logo} points on the logo");
        let found = agreeing(&query_points(&a), stored.points());
        assert_eq!(found.points, 0, "{found:?}");
        // The same photo, cropped, still is (its logo and the rest of it agree).
        let scene_logo = logo(&scene(7, 480, 360));
        assert!(agree(&cropped(&scene_logo, 0.1, 0.3, 0.6), &scene_logo) >= MIN_AGREEING);
    }
}
