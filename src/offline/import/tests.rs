//! Unit tests of the Leaf import: parsing, planning and what a bad file gets.

use super::*;

fn row(line: usize, tag: &str, max_id: u64, step: u64, description: Option<&str>) -> Row {
    Row { line, tag: tag.into(), max_id, step, description: description.map(str::to_string) }
}

fn messages(errors: Vec<RowError>) -> Vec<String> {
    errors.iter().map(ToString::to_string).collect()
}

#[test]
fn parses_mysql_batch_output_with_header() {
    let text = "biz_tag\tmax_id\tstep\tdescription\n\
                leaf-segment-test\t1\t2000\tTest leaf Segment Mode Get Id\n\
                order\t5000\t100\t\n\
                coupon\t7\t1000\tNULL\n";
    assert_eq!(
        parse(text).unwrap(),
        [
            row(2, "leaf-segment-test", 1, 2000, Some("Test leaf Segment Mode Get Id")),
            row(3, "order", 5000, 100, Some("")),
            row(4, "coupon", 7, 1000, None),
        ]
    );
}

#[test]
fn header_is_optional_and_description_may_be_missing() {
    let text = "order\t5000\t100\r\n\r\n  \nmsg\t9223372036854775807\t10000000\t\\N";
    assert_eq!(
        parse(text).unwrap(),
        [row(1, "order", 5000, 100, None), row(4, "msg", i64::MAX as u64, 10_000_000, None)]
    );
    let header_only_three = "BIZ_TAG\tMAX_ID\tSTEP\norder\t5\t1\n";
    assert_eq!(parse(header_only_three).unwrap(), [row(2, "order", 5, 1, None)]);
    assert_eq!(parse("").unwrap(), []);
}

#[test]
fn undoes_mysql_escapes_in_descriptions() {
    let text = "t\t1\t1\ta\\tb\\nc\\\\d\\0e <b>&\n";
    assert_eq!(parse(text).unwrap()[0].description.as_deref(), Some("a\tb\nc\\d\0e <b>&"));
}

#[test]
fn reports_every_bad_row_with_its_line_number() {
    let text = "biz_tag\tmax_id\tstep\tdescription\n\
                good\t1\t1000\tok\n\
                bad name\t1\t1000\t\n\
                zero-max\t0\t1000\t\n\
                big-max\t9223372036854775808\t1000\t\n\
                zero-step\t5\t0\t\n\
                huge-step\t5\t10000001\t\n\
                words\tmany\t1000\t\n\
                short\t5\n\
                long\t5\t5\td\textra\n\
                good\t2\t1000\t\n\
                neg\t-3\t10\t\n\
                null\tNULL\t10\t\n\
                desc\t1\t1\t"
        .to_string()
        + &"x".repeat(1025)
        + "\n";
    let errors = messages(parse(&text).unwrap_err());
    let expected = [
        "line 3: tag 'bad name' may only contain A-Z a-z 0-9 _ . : -",
        "line 4: max_id must be between 1 and 9223372036854775807, got 0",
        "line 5: max_id must be between 1 and 9223372036854775807, got 9223372036854775808",
        "line 6: step must be between 1 and 10000000, got 0",
        "line 7: step must be between 1 and 10000000, got 10000001",
        "line 8: max_id 'many' is not an integer",
        "line 9: expected 3 or 4 tab-separated columns (biz_tag, max_id, step, description), found 2",
        "line 10: expected 3 or 4 tab-separated columns (biz_tag, max_id, step, description), found 5",
        "line 11: tag 'good' already appears on line 2",
        "line 12: max_id must be between 1 and 9223372036854775807, got -3",
        "line 13: max_id is NULL",
        "line 14: description must be at most 1024 bytes",
    ];
    assert_eq!(errors, expected);
}

#[test]
fn a_wrong_header_is_a_bad_row() {
    let errors = messages(parse("biz_tag\tstep\tmax_id\nt\t1\t1\n").unwrap_err());
    assert_eq!(
        errors,
        ["line 1: the header must be 'biz_tag<TAB>max_id<TAB>step<TAB>description' (description optional)"]
    );
}

fn existing(entries: &[(&str, u64, u64, &str)]) -> BTreeMap<String, Existing> {
    entries
        .iter()
        .map(|(tag, max_id, step, description)| {
            (tag.to_string(), Existing { max_id: *max_id, step: *step, description: description.to_string() })
        })
        .collect()
}

#[test]
fn plan_creates_raises_updates_and_leaves_equal_tags_alone() {
    let rows = [
        row(1, "new", 10, 100, Some("fresh")),
        row(2, "same", 500, 1000, Some("d")),
        row(3, "higher", 900, 1000, None),
        row(4, "restep", 500, 2000, Some("d2")),
        row(5, "keepdesc", 500, 1000, None),
    ];
    let cluster = existing(&[
        ("same", 500, 1000, "d"),
        ("higher", 800, 1000, "kept"),
        ("restep", 500, 1000, "d"),
        ("keepdesc", 500, 1000, "anything"),
        ("other", 1, 1, ""),
    ]);
    let changes = plan(&rows, &cluster).unwrap();
    let lines: Vec<String> = changes.iter().map(ToString::to_string).collect();
    assert_eq!(
        lines,
        [
            "create    new: max_id 10, step 100, description \"fresh\"",
            "unchanged same",
            "raise     higher: max_id 800 -> 900",
            "update    restep: step 1000 -> 2000, description \"d\" -> \"d2\"",
            "unchanged keepdesc",
        ]
    );
    assert_eq!(summary(&changes), "1 create, 1 raise, 1 update, 2 unchanged");
}

#[test]
fn plan_refuses_every_row_that_would_lower_max_id() {
    let rows = [row(2, "ok", 10, 1, None), row(3, "old", 99, 1, None), row(7, "older", 1, 1, None)];
    let cluster = existing(&[("old", 100, 1, ""), ("older", 2, 1, "")]);
    assert_eq!(
        messages(plan(&rows, &cluster).unwrap_err()),
        [
            "line 3: tag 'old': max_id 99 is below the cluster's 100; max_id is never lowered",
            "line 7: tag 'older': max_id 1 is below the cluster's 2; max_id is never lowered",
        ]
    );
}
