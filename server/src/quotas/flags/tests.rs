//! The quota flags' parsing and resolution.

use super::*;

fn flags(overrides: &[&str]) -> QuotaFlags {
    QuotaFlags {
        overrides: overrides.iter().map(|s| s.to_string()).collect(),
        ..QuotaFlags::default()
    }
}

#[test]
fn no_flags_no_limits() {
    assert!(flags(&[]).resolve(["a", "b"]).unwrap().is_empty());
}

#[test]
fn defaults_apply_to_every_tenant_and_an_override_to_its_own() {
    let mut f = flags(&["b:create-rate=0.5,max-watches=off,max-open-tasks=7"]);
    f.create_rate = Some(10.0);
    f.max_watches = Some(3);
    let got = f.resolve(["a", "b"]).unwrap();
    let a = got["a"];
    assert_eq!(
        a.create_rate,
        Some(CreateRate {
            per_sec: 10.0,
            burst: 10
        })
    );
    assert_eq!((a.max_watches, a.max_open_tasks), (Some(3), None));
    let b = got["b"];
    assert_eq!(
        b.create_rate,
        Some(CreateRate {
            per_sec: 0.5,
            burst: 1
        })
    );
    assert_eq!((b.max_watches, b.max_open_tasks), (None, Some(7)));
}

#[test]
fn a_tenant_may_lift_every_limit() {
    let mut f = flags(&["a:create-rate=off,max-watches=off,max-open-tasks=off"]);
    f.create_rate = Some(1.0);
    f.max_watches = Some(1);
    f.max_open_tasks = Some(1);
    let got = f.resolve(["a", "b"]).unwrap();
    assert!(!got.contains_key("a"), "{got:?}");
    assert!(got.contains_key("b"));
}

#[test]
fn bad_values_name_the_flag_and_the_key() {
    for (entry, needle) in [
        ("a", "expected TENANT:KEY=VALUE"),
        (":max-watches=1", "tenant is empty"),
        ("a:watches=1", "unknown key \"watches\""),
        (
            "a:max-watches=0",
            "max-watches: must be an integer of at least 1",
        ),
        ("a:max-watches=x", "max-watches"),
        ("a:max-open-tasks=-1", "max-open-tasks"),
        ("a:create-rate=0", "create-rate: must be a number"),
        ("a:create-rate=nan", "create-rate"),
        (
            "a:create-burst=2",
            "create-burst for tenant \"a\" needs a create-rate",
        ),
        ("a:create-rate=1,create-burst=0", "create-burst"),
        (
            "a:max-watches=1,max-watches=2",
            "max-watches is given twice",
        ),
        ("a:max-watches", "expected KEY=VALUE"),
        ("nobody:max-watches=1", "tenant \"nobody\" has no --token"),
    ] {
        let err = flags(&[entry]).resolve(["a"]).unwrap_err();
        assert!(err.starts_with("--tenant-quota: "), "{entry}: {err}");
        assert!(err.contains(needle), "{entry}: {err}");
    }
    let err = flags(&["a:max-watches=1", "a:max-open-tasks=1"])
        .resolve(["a"])
        .unwrap_err();
    assert!(err.contains("given twice"), "{err}");
    let mut f = flags(&[]);
    f.create_burst = Some(3);
    assert_eq!(
        f.resolve(["a"]).unwrap_err(),
        "--tenant-create-burst: needs --tenant-create-rate"
    );
}

#[test]
fn a_tenant_name_may_hold_a_colon() {
    let got = flags(&["org:team:max-watches=2"])
        .resolve(["org:team"])
        .unwrap();
    assert_eq!(got["org:team"].max_watches, Some(2));
}

#[test]
fn the_servers_watch_default_applies_unless_a_flag_or_off_says_otherwise() {
    let got = flags(&[]).resolve_with(["a", "b"], Some(50)).unwrap();
    assert_eq!(got["a"].max_watches, Some(50));
    assert_eq!(got["b"].max_watches, Some(50));
    // `off` lifts it for one tenant: left out, no limit at all.
    let got = flags(&["b:max-watches=off"])
        .resolve_with(["a", "b"], Some(50))
        .unwrap();
    assert_eq!(got["a"].max_watches, Some(50));
    assert!(!got.contains_key("b"), "{got:?}");
    // --tenant-max-watches wins over the default.
    let mut f = flags(&[]);
    f.max_watches = Some(7);
    let got = f.resolve_with(["a"], Some(50)).unwrap();
    assert_eq!(got["a"].max_watches, Some(7));
}
