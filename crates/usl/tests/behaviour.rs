//! Refusals, warnings, fractional loads, predictions and the bootstrap's determinism.

use cachelab_usl::{fit, Method, Options, Params, UslError};

fn opts(method: Method) -> Options {
    Options {
        method,
        ..Options::default()
    }
}

fn exact(p: Params, n: &[f64]) -> Vec<f64> {
    n.iter().map(|&v| p.throughput(v)).collect()
}

const LOADS: [f64; 8] = [1.0, 2.0, 4.0, 8.0, 16.0, 24.0, 32.0, 48.0];

#[test]
fn fewer_than_six_points_are_refused_clearly() {
    let n = [1.0, 2.0, 3.0, 4.0, 5.0];
    let x = [1.0, 1.9, 2.7, 3.4, 4.0];
    let e = fit(&n, &x, &opts(Method::Bounded)).unwrap_err();
    assert_eq!(e, UslError::TooFewPoints { points: 5 });
    assert!(e.to_string().contains("at least 6"), "{e}");
}

#[test]
fn bad_rows_are_named() {
    let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    let cases: [(&[f64], UslError); 3] = [
        (
            &[1.0, 2.0, f64::NAN, 4.0, 5.0, 6.0],
            UslError::NotFinite {
                row: 2,
                column: "N",
            },
        ),
        (
            &[1.0, 2.0, 3.0, 0.0, 5.0, 6.0],
            UslError::NonPositiveLoad { row: 3, value: 0.0 },
        ),
        (&[1.0, 2.0, 3.0], UslError::LengthMismatch { n: 3, x: 6 }),
    ];
    for (n, want) in cases {
        assert_eq!(fit(n, &x, &opts(Method::Bounded)).unwrap_err(), want);
    }
    let e = fit(&[1.0, 1.0, 1.0, 2.0, 2.0, 2.0], &x, &opts(Method::Bounded)).unwrap_err();
    assert_eq!(e, UslError::TooFewLoads { distinct: 2 });
    let e = fit(&LOADS[1..7], &x, &opts(Method::FixedGamma)).unwrap_err();
    assert_eq!(e, UslError::NoUnitLoad);
    let bad_level = Options {
        level: 1.0,
        ..Options::default()
    };
    assert_eq!(
        fit(&LOADS[..6], &x, &bad_level).unwrap_err(),
        UslError::BadLevel(1.0)
    );
}

#[test]
fn fractional_loads_are_kept_as_they_are() {
    let truth = Params::new(7.5, 0.04, 0.003);
    let n = [0.6, 1.35, 2.2, 3.75, 5.5, 7.25, 9.8, 14.1];
    let f = fit(&n, &exact(truth, &n), &opts(Method::Bounded)).unwrap();
    assert_eq!(f.n, n.to_vec());
    assert!((f.params.gamma - 7.5).abs() < 1e-6);
    assert!((f.params.alpha - 0.04).abs() < 1e-7);
    assert!((f.params.beta - 0.003).abs() < 1e-8);
}

#[test]
fn superlinear_data_are_non_physical_unbounded_and_pinned_when_bounded() {
    // Throughput that grows faster than N (alpha < 0).
    let truth = Params::new(10.0, -0.01, 0.0001);
    let x = exact(truth, &LOADS);
    let free = fit(&LOADS, &x, &opts(Method::Unbounded)).unwrap();
    assert!((free.params.alpha + 0.01).abs() < 1e-7);
    assert!(free.warnings.iter().any(|w| w.code == "non_physical"));
    let bounded = fit(&LOADS, &x, &opts(Method::Bounded)).unwrap();
    assert_eq!(bounded.params.alpha, 0.0);
    assert!(bounded.at_bound[1]);
    assert!(bounded.warnings.iter().any(|w| w.code == "at_bound"));
    assert!(!bounded.warnings.iter().any(|w| w.code == "non_physical"));
}

#[test]
fn amdahl_fixes_beta_to_zero() {
    let truth = Params::new(5.0, 0.08, 0.0);
    let f = fit(&LOADS, &exact(truth, &LOADS), &opts(Method::Amdahl)).unwrap();
    assert_eq!(f.params.beta, 0.0);
    assert!(f.se[2].is_none());
    assert_eq!(f.peak.n_max, Some(f64::INFINITY));
    assert!((f.peak.amdahl_limit.unwrap() - 62.5).abs() < 1e-6);
    assert_eq!(f.df, LOADS.len() - 2);
}

#[test]
fn predictions_follow_littles_law_and_flag_extrapolation() {
    let truth = Params::new(100.0, 0.05, 0.002);
    let mut x = exact(truth, &LOADS);
    for (i, v) in x.iter_mut().enumerate() {
        *v *= 1.0 + 0.01 * if i % 2 == 0 { 1.0 } else { -1.0 };
    }
    let f = fit(&LOADS, &x, &opts(Method::Bounded)).unwrap();
    let preds = f.predict(&[10.5, 90.0, 100.0]);
    for p in &preds {
        assert!((p.r - p.n / p.x).abs() < 1e-12);
        assert!((p.r_lo - p.n / p.x_hi).abs() < 1e-12);
        assert!(p.x_lo <= p.x && p.x <= p.x_hi);
        assert!(p.x_pred_lo <= p.x_lo && p.x_hi <= p.x_pred_hi);
    }
    // R(N) = N/X(N) grows with the beta term: (1 + a(N-1) + bN(N-1)) / gamma.
    let want = (1.0 + 0.05 * 99.0 + 0.002 * 100.0 * 99.0) / 100.0;
    assert!((preds[2].r - want).abs() / want < 0.05);
    assert!(!preds[1].extrapolated && preds[2].extrapolated);
    assert!(f.extrapolation_warning(&[90.0]).is_none());
    let w = f.extrapolation_warning(&[10.0, 100.0]).unwrap();
    assert_eq!(w.code, "extrapolation");
    assert!(w.message.contains("N = 100"), "{}", w.message);
}

#[test]
fn bootstrap_is_seeded_and_independent_of_threads() {
    let truth = Params::new(100.0, 0.05, 0.002);
    let mut rng = cachelab_usl::rng::SplitMix64::new(7);
    let x: Vec<f64> = LOADS
        .iter()
        .map(|&n| truth.throughput(n) * (1.0 + 0.03 * rng.normal()))
        .collect();
    let run = |threads, seed| {
        let o = Options {
            bootstrap: 200,
            seed,
            threads,
            ..Options::default()
        };
        fit(&LOADS, &x, &o).unwrap().bootstrap.unwrap()
    };
    let one = run(1, 3);
    assert_eq!(one, run(3, 3));
    assert_ne!(one, run(1, 4));
    let nm = one.n_max.unwrap();
    assert!(nm.lo <= nm.median && nm.median <= nm.hi);
    assert_eq!(one.failed, 0);
}

fn codes(f: &cachelab_usl::Fit) -> Vec<&str> {
    f.warnings.iter().map(|w| w.code).collect()
}

#[test]
fn repeats_at_few_loads_draw_a_warning_and_six_loads_do_not() {
    let truth = Params::new(100.0, 0.05, 0.002);
    let few = [1.0, 1.0, 4.0, 4.0, 16.0, 16.0, 32.0, 32.0];
    let f = fit(&few, &exact(truth, &few), &opts(Method::Bounded)).unwrap();
    assert!(codes(&f).contains(&"few_loads"), "{:?}", f.warnings);
    let six = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0];
    let f = fit(&six, &exact(truth, &six), &opts(Method::Bounded)).unwrap();
    assert!(!codes(&f).contains(&"few_loads"), "{:?}", f.warnings);
}

#[test]
fn a_single_noisy_point_at_the_start_is_named() {
    let truth = Params::new(100.0, 0.05, 0.002);
    // Small noise everywhere, one large error at N = 1 (its only measurement).
    let noise = [0.0, 0.6, -0.5, 0.4, -0.6, 0.5, -0.4, 0.3];
    let mut x: Vec<f64> = exact(truth, &LOADS)
        .iter()
        .zip(noise)
        .map(|(v, e)| v + e)
        .collect();
    let clean = fit(&LOADS, &x, &opts(Method::Bounded)).unwrap();
    assert!(
        !codes(&clean).contains(&"single_unit_point"),
        "{:?}",
        clean.warnings
    );
    x[0] += 12.0;
    let noisy = fit(&LOADS, &x, &opts(Method::Bounded)).unwrap();
    assert!(
        codes(&noisy).contains(&"single_unit_point"),
        "{:?}",
        noisy.warnings
    );
    // A method that takes gamma from X(1) always says so when there is one such point.
    let fixed = fit(&LOADS, &exact(truth, &LOADS), &opts(Method::FixedGamma)).unwrap();
    assert!(
        codes(&fixed).contains(&"single_unit_point"),
        "{:?}",
        fixed.warnings
    );
}

#[test]
fn a_poor_fit_is_judged_by_the_residual_standard_error() {
    let truth = Params::new(100.0, 0.05, 0.002);
    let wobble = [60.0, -80.0, 90.0, -70.0, 80.0, -90.0, 60.0, -80.0];
    let x: Vec<f64> = exact(truth, &LOADS)
        .iter()
        .zip(wobble)
        .map(|(v, e)| v + e)
        .collect();
    let f = fit(&LOADS, &x, &opts(Method::Bounded)).unwrap();
    let poor = f
        .warnings
        .iter()
        .find(|w| w.code == "poor_fit")
        .expect("poor_fit");
    assert!(
        poor.message.contains("residual standard error"),
        "{}",
        poor.message
    );
    let good = fit(&LOADS, &exact(truth, &LOADS), &opts(Method::Bounded)).unwrap();
    assert!(!codes(&good).contains(&"poor_fit"));
}

#[test]
fn throughputs_whose_squares_underflow_or_overflow_are_refused() {
    let truth = Params::new(1000.0, 0.05, 2e-4);
    let good = exact(truth, &LOADS);
    for scale in [1e-313, 1e-160, 1e160] {
        let x: Vec<f64> = good.iter().map(|v| v * scale).collect();
        let e = fit(&LOADS, &x, &opts(Method::Bounded)).unwrap_err();
        assert!(matches!(e, UslError::OutOfScale { .. }), "{scale}: {e}");
        let msg = e.to_string();
        assert!(
            msg.contains("double precision") && msg.contains("unit"),
            "{msg}"
        );
    }
    // Small but representable: the fit moves from its start and finds the truth.
    let x: Vec<f64> = good.iter().map(|v| v * 1e-140).collect();
    let f = fit(&LOADS, &x, &opts(Method::Bounded)).unwrap();
    assert!((f.params.alpha - 0.05).abs() < 1e-6, "{:?}", f.params);
    assert!((f.params.beta - 2e-4).abs() < 1e-8, "{:?}", f.params);
    assert!(f.sigma >= 0.0 && f.sigma.is_finite());
}
