//! The HTML report, rendered in headless Chromium: real recordings (the stored fixtures, made
//! by `stallscope run` on real JVMs) and a real lab run's results. The page reports its own
//! health in the DOM (body[data-rendered], #errors); the tests read that, count what was drawn,
//! and check that screenshots are not blank, in light and dark mode.

#[path = "common/browser.rs"]
mod browser;
mod common;

use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn fixture(rel: &str) -> PathBuf {
    root().join("tests/fixtures").join(rel)
}

fn html_of(dir: &Path, out: &Path) {
    let o = stallscope()
        .args(["report", dir.to_str().unwrap(), "--html", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("needs no network"));
}

/// The page drew itself with no error of any kind.
fn healthy(dom: &str) {
    let errors = dom
        .split("<pre id=\"errors\"")
        .nth(1)
        .and_then(|r| r.split('>').nth(1))
        .and_then(|r| r.split("</pre").next())
        .unwrap_or("?");
    assert_eq!(
        browser::attr(dom, "<body", "data-errors").as_deref(),
        Some("0"),
        "errors in the page: {errors}"
    );
    assert_eq!(
        browser::attr(dom, "<body", "data-rendered").as_deref(),
        Some("ok"),
        "the page did not finish drawing: {errors}"
    );
    assert!(errors.trim().is_empty(), "errors in the page: {errors}");
}

fn self_contained(html: &str) {
    for bad in [
        "src=\"http",
        "href=\"http",
        "src=\"//",
        "href=\"//",
        "@import",
        "url(http",
        "fetch(",
        "XMLHttpRequest",
    ] {
        assert!(!html.contains(bad), "the page refers to the network ({bad})");
    }
}

#[test]
fn a_recording_renders_with_timeline_percentiles_and_drilldown() {
    let d = scratch("html-recording");
    for (name, culprit) in [
        ("jdk17-mapped-read-mmap-slowfs-300ms", Some("reader-thread")),
        ("jdk25-counted-loop-parallel-no-cls", Some("counted-loop")),
        ("jdk17-counted-loop-parallel-no-cls-frames", Some("counted-loop")),
        ("jdk17-safepoint-storm-cpu-hog4", None),
        ("jdk25-counted-loop-threaddump-who", Some("counted-loop")),
    ] {
        let rec = fixture(&format!("recordings/{name}"));
        let page = d.join(format!("{name}.html"));
        html_of(&rec, &page);
        let html = std::fs::read_to_string(&page).unwrap();
        self_contained(&html);
        let r = report(&rec);
        let dom = browser::dump_dom(&page, &[]);
        healthy(&dom);
        assert_eq!(browser::attr(&dom, "<body", "data-kind").as_deref(), Some("recording"));

        // The timeline holds every safepoint and stall, and drew them.
        let safepoints = r.summary.safepoints as i64;
        let stalls = r.summary.stalls as i64;
        assert!(safepoints > 0 && stalls > 0, "{name}: the fixture has safepoints and stalls");
        assert_eq!(browser::num(&dom, "id=\"timeline\"", "data-safepoints"), safepoints, "{name}");
        assert_eq!(browser::num(&dom, "id=\"timeline\"", "data-stalls"), stalls, "{name}");
        assert!(
            browser::num(&dom, "id=\"timeline\"", "data-drawn-safepoints") > 0,
            "{name}: safepoint bars drawn"
        );
        assert!(
            browser::num(&dom, "role=\"img\" aria-label=\"timeline", "data-ink") > 1000,
            "{name}: the timeline canvas has ink"
        );

        // Percentiles: hiccups, TTSP and the control meter.
        assert_eq!(browser::num(&dom, "id=\"percentiles\"", "data-series"), 3, "{name}");
        assert!(browser::num(&dom, "aria-label=\"percentile", "data-ink") > 500, "{name}");

        // The drill-down: every stall listed, the longest selected, its threads drawn, and
        // the culprit highlighted.
        assert_eq!(browser::num(&dom, "id=\"drilldown\"", "data-stalls"), stalls, "{name}");
        assert_eq!(
            dom.matches("<tr class=\"clickable").count() as i64,
            stalls,
            "{name}: one row per stall"
        );
        let longest = r.stalls.iter().max_by_key(|s| s.duration_ns).unwrap();
        assert_eq!(
            browser::num(&dom, "id=\"drilldown\"", "data-selected"),
            longest.stall as i64,
            "{name}: the longest stall is shown first"
        );
        assert!(
            browser::num(&dom, "id=\"drilldown\"", "data-rows") >= (longest.threads as i64).min(10),
            "{name}: a strip per thread"
        );
        assert!(
            browser::num(&dom, "aria-label=\"thread states", "data-ink") > 1000,
            "{name}: the strips are drawn"
        );
        if let Some(c) = culprit {
            assert!(
                browser::num(&dom, "id=\"drilldown\"", "data-culprit-rows") >= 1,
                "{name}: the culprit's row is highlighted"
            );
            assert!(dom.contains(&format!("culprit \"{c}\"")), "{name}: the culprit is named");
        }
        let cause = &longest.findings[0].title;
        assert!(dom.contains(&format!("cause: {cause}")), "{name}: the cause in words");
        // In the colour its module gives it.
        let colour = longest.findings[0].cause.spec().colour;
        assert!(
            dom.contains(&format!("class=\"cause-dot\" data-colour=\"{colour}\"")),
            "{name}: the cause's colour, {colour}"
        );
        // The culprit's code, as a stack trace, when the JVM's stacks were recorded.
        if let Some(top) = longest.findings[0]
            .culprits
            .first()
            .and_then(|c| c.code.as_ref())
            .and_then(|code| code.frames.first())
            .map(|f| &f.method)
        {
            assert!(dom.contains(&format!("at {top}")), "{name}: the culprit's code is shown");
        }
        assert!(dom.contains("fix: "), "{name}: and the fix");
        // Who set it off, when the recording looked (what it did, how that is known), and its
        // name in the stall table's column.
        if let Some(i) = &longest.findings[0].instigator {
            let (did, kind) = (&i.did, i.kind.id());
            assert!(dom.contains(&format!("data-kind=\"{kind}\"")), "{name}: who, as {kind}");
            let start: String = did.chars().take(40).collect();
            assert!(
                dom.contains(&start) || dom.contains(&start.replace('"', "&quot;")),
                "{name}: {start}"
            );
            assert!(dom.contains("how we know: "), "{name}");
            assert!(dom.contains("who set it off"), "{name}: the table's column");
        }

        // The per-operation table.
        assert!(browser::num(&dom, "id=\"ops\"", "data-rows") >= 1, "{name}");
    }
}

#[test]
fn screenshots_are_not_blank_in_light_and_dark_mode() {
    let d = scratch("html-shots");
    let page = d.join("report.html");
    html_of(&fixture("recordings/jdk17-mapped-read-mmap-slowfs-300ms"), &page);
    let (w, h, light) = browser::screenshot(&page, &d.join("light.png"), 1280, 1600, &[]);
    assert_eq!((w, h), (1280, 1600));
    let (share, colours) = browser::ink(&light);
    assert!(
        share > 0.03 && colours > 12,
        "a light screenshot with content: {share:.3} of pixels, {colours} colours"
    );
    assert!(light[..3].iter().all(|c| *c > 200), "light mode has a light background");
    let (_, _, dark) = browser::screenshot(
        &page,
        &d.join("dark.png"),
        1280,
        1600,
        &["--force-dark-mode", "--blink-settings=preferredColorScheme=0"],
    );
    let (share, colours) = browser::ink(&dark);
    assert!(share > 0.03 && colours > 12, "a dark screenshot with content: {share:.3}, {colours}");
    assert!(dark[..3].iter().all(|c| *c < 60), "dark mode has a dark background: {:?}", &dark[..4]);
    // Printable: Chromium's own PDF of it.
    let pdf = d.join("report.pdf");
    browser::run(&page, &[&format!("--print-to-pdf={}", pdf.display()), "--no-pdf-header-footer"]);
    let bytes = std::fs::read(&pdf).unwrap();
    assert!(
        bytes.starts_with(b"%PDF") && bytes.len() > 20_000,
        "a PDF with the report in it ({} bytes)",
        bytes.len()
    );
}

#[test]
fn a_quiet_recording_renders_with_no_stalls() {
    let d = scratch("html-quiet");
    let page = d.join("quiet.html");
    html_of(&fixture("recordings/jdk17-idle-quiet"), &page);
    let dom = browser::dump_dom(&page, &[]);
    healthy(&dom);
    assert_eq!(browser::num(&dom, "id=\"drilldown\"", "data-stalls"), 0);
    assert!(dom.contains("No stalls of 5.00 ms or more"));
    assert!(
        browser::num(&dom, "id=\"percentiles\"", "data-series") >= 2,
        "hiccups and control at least (a quiet JVM may have no safepoint)"
    );
}

#[test]
fn a_lab_run_renders_with_box_plots_verdicts_and_confusion_matrix() {
    let d = scratch("html-lab");
    let lab_dir = d.join("lab");
    std::fs::create_dir_all(&lab_dir).unwrap();
    std::fs::copy(fixture("lab/quick/lab.json"), lab_dir.join("lab.json")).unwrap();
    let lab: Value =
        serde_json::from_str(&std::fs::read_to_string(lab_dir.join("lab.json")).unwrap()).unwrap();
    let o = stallscope().args(["report", lab_dir.to_str().unwrap(), "--html"]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let page = lab_dir.join("lab.html");
    self_contained(&std::fs::read_to_string(&page).unwrap());
    let dom = browser::dump_dom(&page, &[]);
    healthy(&dom);
    assert_eq!(browser::attr(&dom, "<body", "data-kind").as_deref(), Some("lab"));
    let scenarios = lab["scenarios"].as_array().unwrap();
    assert_eq!(browser::num(&dom, "id=\"lab\"", "data-scenarios"), scenarios.len() as i64);
    assert_eq!(
        dom.matches("class=\"boxplot\"").count(),
        scenarios.len(),
        "one box plot per scenario"
    );
    for s in scenarios {
        let id = s["id"].as_str().unwrap();
        assert!(dom.contains(&format!("id=\"scenario-{id}\"")), "{id}");
        assert!(
            dom.contains(&format!("class=\"badge {}\"", s["verdict"].as_str().unwrap())),
            "{id}: its verdict"
        );
        if s["published"]["baseline"].is_number() {
            assert!(
                dom.contains(s["published"]["text"].as_str().unwrap()),
                "{id}: the seed's figure"
            );
        }
    }
    let ink: Vec<i64> = dom
        .match_indices("<canvas class=\"boxplot\"")
        .map(|(i, _)| browser::num(&dom[i..], "class=\"boxplot\"", "data-ink"))
        .collect();
    assert!(ink.iter().all(|n| *n > 300), "every box plot is drawn: {ink:?}");
    let cells: usize = lab["confusion"]
        .as_object()
        .unwrap()
        .values()
        .map(|m| m.as_object().unwrap().values().filter(|n| n.as_u64().unwrap() > 0).count())
        .sum();
    assert_eq!(
        browser::num(&dom, "id=\"confusion\"", "data-cells"),
        cells as i64,
        "the confusion matrix has every non-empty cell"
    );
    let (_, _, px) = browser::screenshot(&page, &d.join("lab.png"), 1280, 1400, &[]);
    let (share, colours) = browser::ink(&px);
    assert!(share > 0.03 && colours > 8, "{share:.3}, {colours}");
}

#[test]
fn html_for_a_directory_that_is_neither_is_a_clear_error() {
    let d = scratch("html-bad");
    let o = stallscope().args(["report", d.to_str().unwrap(), "--html"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("neither a stallscope recording") && err.lines().count() == 1, "{err}");
}
