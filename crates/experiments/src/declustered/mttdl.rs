//! Mean time to data loss from the LANL study's Markov model (section IV of
//! `../shared/reference/papers/003_*`), as written there.
//!
//! A drive fails at rate λ and a failed drive is recovered at rate μ; state i is i drives
//! down; an array of G drives that tolerates m failures loses data in state m + 1. With
//! T_λ = 1/λ (the drive's mean time between failures) and T_μ = 1/μ (the mean time to
//! recover), the study's equation for one array and for a pool of C drives:
//!
//! ```text
//!   MTTDL_array = T_λ / G * prod_{i=1..m} 1 / (1 - exp(-T_μ (G - i) / T_λ))
//!   MTTDL_pool  = MTTDL_array / k = G * MTTDL_array / C
//!              ~= T_λ / C * prod_{i=1..m} T_λ / (T_μ (G - i))
//! ```
//!
//! T_λ comes from the annual failure rate as the study takes it: AFR = 1 - exp(-8766 / T_λ)
//! (8766 hours in a year), so T_λ = -8766 / ln(1 - AFR); the study uses Backblaze's 0.97%.
//! Declustered and classic arrays are compared as the study compares dRAID and RAIDZ: the
//! same T_λ, m, C and G, so only T_μ differs, and the ratio is what it reports (3.96 for
//! 6 x (5+2) + 2 on 44 drives; the absolute years it gives are, in its words, meaningless).

/// Hours in a year, as the study counts them.
pub const HOURS_PER_YEAR: f64 = 8766.0;
/// The annual failure rate the study adopts (Backblaze).
pub const STUDY_AFR: f64 = 0.0097;

/// T_λ in hours for an annual failure rate `afr` (0..1): -8766 / ln(1 - AFR).
pub fn mean_hours_between_failures(afr: f64) -> f64 {
    -HOURS_PER_YEAR / (1.0 - afr).ln()
}

/// MTTDL in hours of one array of `width` (G) drives tolerating `parity` (m) failures,
/// each drive failing every `mtbf_hours` (T_λ) and recovered in `recovery_hours` (T_μ).
pub fn array_hours(mtbf_hours: f64, recovery_hours: f64, width: u32, parity: u32) -> f64 {
    let g = f64::from(width);
    (1..=parity).fold(mtbf_hours / g, |mttdl, i| {
        let x = recovery_hours * (g - f64::from(i)) / mtbf_hours;
        // 1 - exp(-x) for the small x of real drives, without losing its digits.
        mttdl / -(-x).exp_m1()
    })
}

/// MTTDL in hours of a pool of `drives` (C) drives made of arrays of `width` drives:
/// G * MTTDL_array / C.
pub fn pool_hours(mtbf_hours: f64, recovery_hours: f64, drives: u32, width: u32, parity: u32) -> f64 {
    f64::from(width) * array_hours(mtbf_hours, recovery_hours, width, parity) / f64::from(drives)
}

/// The study's approximation of `pool_hours`: T_λ / C * prod T_λ / (T_μ (G - i)).
pub fn pool_hours_approx(mtbf_hours: f64, recovery_hours: f64, drives: u32, width: u32, parity: u32) -> f64 {
    (1..=parity)
        .fold(mtbf_hours / f64::from(drives), |mttdl, i| mttdl * mtbf_hours / (recovery_hours * f64::from(width - i)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 0.97% a year is a drive failing every 899,321 hours (by hand: 8766 / -ln 0.9903).
    #[test]
    fn afr_to_hours_as_the_study_converts_it() {
        let hours = mean_hours_between_failures(STUDY_AFR);
        assert!((hours - 899_321.22).abs() < 0.01, "{hours}");
        // And back: the share of drives failing within a year.
        assert!((1.0 - (-HOURS_PER_YEAR / hours).exp() - STUDY_AFR).abs() < 1e-12);
    }

    /// A hand-computed case: 12 drives, arrays of 5 with one parity, recovery in 10 hours.
    /// MTTDL_array = T/5 / (1 - exp(-40/T)) with T = 899,321.22: 1/(1 - exp(-x)) is
    /// 1/x + 1/2 to within x/12, so 22,483.03 + 0.5; times T/5 = 179,864.24, that is
    /// 4,043,983,214 hours; the pool's is 5/12 of it, 1,684,993,006 hours (192,219 years).
    #[test]
    fn mttdl_of_a_hand_computed_case() {
        let t = mean_hours_between_failures(STUDY_AFR);
        let array = array_hours(t, 10.0, 5, 1);
        let by_hand = t / 5.0 * (t / 40.0 + 0.5);
        assert!((array / by_hand - 1.0).abs() < 1e-9, "{array} {by_hand}");
        let pool = pool_hours(t, 10.0, 12, 5, 1);
        assert!((pool - 1_684_993_006.0).abs() < 1.0, "{pool}");
        assert!((pool / HOURS_PER_YEAR - 192_219.14).abs() < 0.01, "{}", pool / HOURS_PER_YEAR);
        // The approximation drops the 1/2: off by x/2 = 2.2e-5 of it.
        let approx = pool_hours_approx(t, 10.0, 12, 5, 1);
        assert!((pool / approx - 1.0 - 20.0 / t).abs() < 1e-9, "{pool} {approx}");
    }

    /// With two parity chunks the pool's MTTDL goes as 1/T_μ²: recovering 3x as fast is
    /// 9x the MTTDL (for T_μ of hours against T_λ of a hundred years, to within 1e-4).
    #[test]
    fn two_parity_chunks_go_as_the_square_of_the_recovery_time() {
        let t = mean_hours_between_failures(STUDY_AFR);
        let ratio = pool_hours(t, 4.0, 44, 7, 2) / pool_hours(t, 12.0, 44, 7, 2);
        assert!((ratio - 9.0).abs() < 1e-3, "{ratio}");
        let years = pool_hours(t, 4.0, 44, 7, 2) / HOURS_PER_YEAR;
        assert!((years / 3_928_798_601.0 - 1.0).abs() < 1e-9, "{years}");
    }
}
