//! Published USL fits reproduced from the same data (tests/data/usl/, see its README for the
//! sources): coefficients and, where published, standard errors to 3 significant figures.

use cachelab_usl::{fit, Fit, Method, Options};

fn read(name: &str) -> (Vec<f64>, Vec<f64>) {
    let path = format!("{}/../../tests/data/usl/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut n = Vec::new();
    let mut x = Vec::new();
    for line in text.lines().skip(1).filter(|l| !l.trim().is_empty()) {
        let (a, b) = line.split_once(',').expect("two columns");
        n.push(a.trim().parse().unwrap());
        x.push(b.trim().parse().unwrap());
    }
    (n, x)
}

#[derive(Clone, Copy)]
enum Want {
    /// Agrees within half a unit of the third significant figure.
    Sig3(f64),
    /// Exactly this (a parameter at its bound, a whole N, a degrees-of-freedom count).
    Exact(f64),
}

type Getter = fn(&Fit) -> f64;

const ALPHA: (&str, Getter) = ("alpha", |f| f.params.alpha);
const BETA: (&str, Getter) = ("beta", |f| f.params.beta);
const GAMMA: (&str, Getter) = ("gamma", |f| f.params.gamma);
const SE_GAMMA: (&str, Getter) = ("se gamma", |f| f.se[0].unwrap());
const SE_ALPHA: (&str, Getter) = ("se alpha", |f| f.se[1].unwrap());
const SE_BETA: (&str, Getter) = ("se beta", |f| f.se[2].unwrap());
const SIGMA: (&str, Getter) = ("residual SE", |f| f.sigma);
const DF: (&str, Getter) = ("df", |f| f.df as f64);
const N_MAX: (&str, Getter) = ("Nmax", |f| f.peak.n_max.unwrap());
const N_MAX_FLOOR: (&str, Getter) = ("floor Nmax", |f| f.peak.n_max_floor.unwrap() as f64);
const X_MAX: (&str, Getter) = ("peak X", |f| f.peak.x_max.unwrap());

struct Case {
    file: &'static str,
    method: Method,
    source: &'static str,
    want: &'static [((&'static str, Getter), Want)],
}

use Want::{Exact, Sig3};

const CASES: &[Case] = &[
    Case {
        file: "raytracer.csv",
        method: Method::Bounded,
        source: "R usl 3.0.3, bounded NLS",
        want: &[
            (ALPHA, Sig3(0.057771)),
            (BETA, Exact(0.0)),
            (GAMMA, Sig3(21.848843)),
            (SE_ALPHA, Sig3(0.013293)),
            (SE_GAMMA, Sig3(2.196165)),
            (SIGMA, Sig3(9.34)),
            (DF, Exact(8.0)),
        ],
    },
    Case {
        file: "raytracer.csv",
        method: Method::Linearised,
        source: "R usl 1.8.0 / Guerrilla Capacity Planning ch. 5, gamma = X(1)",
        want: &[
            (ALPHA, Sig3(0.05002394)),
            (BETA, Sig3(4.708e-6)),
            (GAMMA, Exact(20.0)),
        ],
    },
    Case {
        file: "specsdm91.csv",
        method: Method::Bounded,
        source: "R usl 3.0.3, bounded NLS",
        want: &[
            (ALPHA, Sig3(0.0277285)),
            (BETA, Sig3(0.0001044)),
            (GAMMA, Sig3(89.9952)),
            (SE_ALPHA, Sig3(0.0091217)),
            (SE_BETA, Sig3(0.0000199)),
            (SE_GAMMA, Sig3(14.2134906)),
            (SIGMA, Sig3(82.8)),
            (DF, Exact(4.0)),
            (N_MAX, Sig3(96.52)),
            (X_MAX, Sig3(1884.0)),
        ],
    },
    Case {
        file: "r_usl_tests_synthetic.csv",
        method: Method::Bounded,
        source: "R usl tests: C(N) for alpha = beta = 0.02, gamma = 1",
        want: &[(ALPHA, Sig3(0.02)), (BETA, Sig3(0.02)), (GAMMA, Sig3(1.0))],
    },
    Case {
        file: "psa_cisco_mysql.csv",
        method: Method::Unbounded,
        source: "Schwartz, Practical Scalability Analysis with the USL (2015)",
        want: &[
            (GAMMA, Sig3(995.6486)),
            (ALPHA, Sig3(0.02671591)),
            (BETA, Sig3(0.0007690945)),
            (N_MAX_FLOOR, Exact(35.0)),
            (X_MAX, Sig3(12341.0)),
        ],
    },
];

fn sig3_ok(got: f64, want: f64) -> bool {
    let unit = 10f64.powf(want.abs().log10().floor() - 2.0);
    (got - want).abs() <= 0.5 * unit
}

#[test]
fn published_fits_are_reproduced() {
    let mut failures = Vec::new();
    for case in CASES {
        let (n, x) = read(case.file);
        let options = Options {
            method: case.method,
            ..Options::default()
        };
        let f = fit(&n, &x, &options).unwrap_or_else(|e| panic!("{}: {e}", case.file));
        assert!(f.converged, "{} did not converge", case.file);
        for ((what, get), want) in case.want {
            let got = get(&f);
            let ok = match *want {
                Sig3(w) => sig3_ok(got, w),
                Exact(w) => got == w,
            };
            if !ok {
                failures.push(format!(
                    "{} ({}; {}): {what} = {got:e}, published {:?}",
                    case.file,
                    case.method.name(),
                    case.source,
                    match want {
                        Sig3(w) | Exact(w) => w,
                    }
                ));
            }
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn sig3_comparison_is_strict_enough() {
    assert!(sig3_ok(0.05780, 0.057771));
    assert!(!sig3_ok(0.05784, 0.057771));
    assert!(!sig3_ok(21.9, 21.848843));
}
