//! The built-in tools' edge cases, swept against pi 0.73.1, 0.87.1 and 1.6.0 (oracle scenarios
//! `/work/scen-swtools/t*`: each expectation here is what the three pis answered). Real binary
//! over pipes, the fake Anthropic server, exact texts.

mod support;

use serde_json::{Value, json};

use support::anthropic::{reply, text, tool_call};
use support::fake_llm::Reply;
use support::frames::tool_end;
use support::{Pith, World, fake_world};

const ALL: [&str; 3] = ["0.73", "0.87", "1.6"];

/// One reply with `calls` (id, tool, raw JSON arguments), then "done".
fn replies(calls: &[(&str, &str, &str)]) -> Vec<Reply> {
    let blocks: Vec<_> = calls
        .iter()
        .map(|(id, name, args)| tool_call(id, name, &[args]))
        .collect();
    vec![reply(1, &blocks), reply(2, &[text(&["done"])])]
}

/// Run one prompt with `calls` under `compat` in a world prepared by `setup`; the frames.
fn run_calls(
    compat: &str,
    calls: &[(&str, &str, &str)],
    setup: impl Fn(&World),
) -> (World, Vec<Value>) {
    let (world, _llm) = fake_world(replies(calls));
    setup(&world);
    let mut p: Pith = support::spawn_compat(
        &world,
        compat,
        &["--tools", "read,bash,edit,write,grep,find,ls"],
    );
    let f = support::frames::run(&mut p, "p1", "go");
    (world, f)
}

/// `(text of the first block, isError)` of a call's end.
fn result(frames: &[Value], id: &str) -> (String, bool) {
    let end = tool_end(frames, id);
    (
        end["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        end["isError"] == true,
    )
}

fn write(world: &World, name: &str, content: &str) {
    let p = world.cwd().join(name);
    if let Some(d) = p.parent() {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(p, content).unwrap();
}

#[test]
fn a_failed_command_without_output_says_no_output() {
    for compat in ALL {
        let (_w, f) = run_calls(
            compat,
            &[
                ("e", "bash", r#"{"command":"exit 1"}"#),
                ("o", "bash", r#"{"command":"echo out; exit 2"}"#),
            ],
            |_| {},
        );
        assert_eq!(
            result(&f, "e"),
            ("(no output)\n\nCommand exited with code 1".into(), true),
            "{compat}"
        );
        assert_eq!(
            result(&f, "o"),
            ("out\n\n\nCommand exited with code 2".into(), true),
            "{compat}"
        );
    }
}

#[test]
fn edit_of_a_missing_file_or_a_directory_says_what_node_says() {
    for compat in ALL {
        let (_w, f) = run_calls(
            compat,
            &[
                (
                    "m",
                    "edit",
                    r#"{"path":"missing.txt","edits":[{"oldText":"a","newText":"b"}]}"#,
                ),
                (
                    "d",
                    "edit",
                    r#"{"path":"dir","edits":[{"oldText":"a","newText":"b"}]}"#,
                ),
            ],
            |w| write(w, "dir/x", "x"),
        );
        assert_eq!(
            result(&f, "m"),
            (
                "Could not edit file: missing.txt. Error code: ENOENT.".into(),
                true
            ),
            "{compat}"
        );
        assert_eq!(
            result(&f, "d"),
            (
                "EISDIR: illegal operation on a directory, read".into(),
                true
            ),
            "{compat}"
        );
    }
}

#[test]
fn pi_073_validates_with_typebox_converting_nulls() {
    let calls = [
        ("missing", "read", r#"{}"#),
        ("scalar", "edit", r#"{"path":"f.txt","edits":"x"}"#),
        ("nullpath", "read", r#"{"path":null}"#),
        (
            "nulls",
            "read",
            r#"{"path":"f.txt","offset":null,"limit":null}"#,
        ),
        (
            "extra",
            "edit",
            r#"{"path":"g.txt","edits":[{"oldText":"a","newText":"A","extra":1}]}"#,
        ),
        ("spaced", "read", r#"{"path":"f.txt","limit":" 2 "}"#),
    ];
    for compat in ["0.73", "0.87"] {
        let (w, f) = run_calls(compat, &calls, |w| {
            write(w, "f.txt", "a\nb\nc\n");
            write(w, "g.txt", "a\n");
        });
        assert_eq!(
            result(&f, "missing"),
            (
                "Validation failed for tool \"read\":\n  - path: must have required properties path\n\nReceived arguments:\n{}".into(),
                true
            ),
            "{compat}"
        );
        assert_eq!(
            result(&f, "scalar"),
            (
                "Validation failed for tool \"edit\":\n  - edits.0: must be object\n\nReceived arguments:\n{\n  \"path\": \"f.txt\",\n  \"edits\": \"x\"\n}".into(),
                true
            ),
            "{compat}"
        );
        let null_path = w.cwd().join("null");
        assert_eq!(
            result(&f, "nullpath"),
            (
                format!(
                    "ENOENT: no such file or directory, access '{}'",
                    null_path.display()
                ),
                true
            ),
            "{compat}"
        );
        assert_eq!(
            result(&f, "spaced"),
            (
                "a\nb\n\n[2 more lines in file. Use offset=3 to continue.]".into(),
                false
            ),
            "{compat}"
        );
        if compat == "0.73" {
            // null → 0 for both: no lines, and the notice.
            assert_eq!(
                result(&f, "nulls"),
                (
                    "\n\n[4 more lines in file. Use offset=1 to continue.]".into(),
                    false
                )
            );
            assert_eq!(
                result(&f, "extra"),
                (
                    "Validation failed for tool \"edit\":\n  - edits.0.extra: schema is false\n  - edits.0: must not have additional properties\n\nReceived arguments:\n{\n  \"path\": \"g.txt\",\n  \"edits\": [\n    {\n      \"oldText\": \"a\",\n      \"newText\": \"A\",\n      \"extra\": 1\n    }\n  ]\n}".into(),
                    true
                )
            );
        } else {
            // 0.87.1 drops the nulls, and its edit schema takes other properties.
            assert_eq!(result(&f, "nulls"), ("a\nb\nc\n".into(), false));
            assert_eq!(
                result(&f, "extra"),
                ("Successfully replaced 1 block(s) in g.txt.".into(), false)
            );
        }
    }
}

#[test]
fn read_slices_lines_as_javascript_arrays_for_odd_limits() {
    for compat in ALL {
        let (_w, f) = run_calls(
            compat,
            &[
                ("neg", "read", r#"{"path":"f.txt","limit":-1}"#),
                ("frac", "read", r#"{"path":"f.txt","limit":1.5}"#),
                ("foff", "read", r#"{"path":"f.txt","offset":2.5,"limit":1}"#),
            ],
            |w| write(w, "f.txt", "a\nb\nc\n"),
        );
        assert_eq!(
            result(&f, "neg"),
            (
                "a\nb\nc\n\n[5 more lines in file. Use offset=0 to continue.]".into(),
                false
            ),
            "{compat}"
        );
        assert_eq!(
            result(&f, "frac"),
            (
                "a\n\n[2.5 more lines in file. Use offset=2.5 to continue.]".into(),
                false
            ),
            "{compat}"
        );
        assert_eq!(
            result(&f, "foff"),
            (
                "b\n\n[1.5 more lines in file. Use offset=3.5 to continue.]".into(),
                false
            ),
            "{compat}"
        );
    }
}

#[test]
fn read_finds_a_decomposed_name_given_composed() {
    for compat in ALL {
        let (_w, f) = run_calls(
            compat,
            &[("r", "read", "{\"path\":\"caf\u{e9}.txt\"}")],
            |w| write(w, "cafe\u{301}.txt", "nfd\n"),
        );
        assert_eq!(result(&f, "r"), ("nfd\n".into(), false), "{compat}");
    }
}

#[test]
fn ls_takes_the_limit_as_given_before_16() {
    for compat in ALL {
        let (_w, f) = run_calls(
            compat,
            &[
                ("neg", "ls", r#"{"path":"d","limit":-1}"#),
                ("frac", "ls", r#"{"path":"d","limit":1.5}"#),
            ],
            |w| {
                for n in ["d/a.txt", "d/b.txt", "d/c.txt"] {
                    write(w, n, "");
                }
            },
        );
        let v16 = compat == "1.6";
        assert_eq!(
            result(&f, "neg").0,
            if v16 {
                "a.txt\n\n[1 entries limit reached. Use limit=2 for more]"
            } else {
                "(empty directory)"
            },
            "{compat}"
        );
        let frac = tool_end(&f, "frac");
        if v16 {
            assert_eq!(
                frac["result"]["content"][0]["text"],
                "a.txt\n\n[1 entries limit reached. Use limit=2 for more]"
            );
        } else {
            assert_eq!(
                frac["result"]["content"][0]["text"],
                "a.txt\nb.txt\n\n[1.5 entries limit reached. Use limit=3 for more]",
                "{compat}"
            );
            assert_eq!(frac["result"]["details"], json!({"entryLimitReached": 1.5}));
        }
    }
}

#[test]
fn grep_lines_are_rgs_under_16() {
    let calls = [
        (
            "ov",
            "grep",
            r#"{"pattern":"m","path":"ov.txt","context":2}"#,
        ),
        (
            "eof",
            "grep",
            r#"{"pattern":"end","path":"eof.txt","context":3}"#,
        ),
        (
            "cr",
            "grep",
            r#"{"pattern":"x","path":"cr.txt","context":1}"#,
        ),
        (
            "win",
            "grep",
            r#"{"pattern":"m","path":"ov.txt","context":2,"limit":1}"#,
        ),
    ];
    let setup = |w: &World| {
        write(w, "ov.txt", "1\nm1\n2\nm2\n3\n4\n5\n6\nm3\n7\n");
        write(w, "eof.txt", "a\nb\nend\n");
        write(w, "cr.txt", "a\r\nx1\rmid\r\nb\n");
    };
    let (_w, f) = run_calls("1.6", &calls, setup);
    assert_eq!(
        result(&f, "ov").0,
        "ov.txt-1- 1\nov.txt:2: m1\nov.txt-3- 2\nov.txt:4: m2\nov.txt-5- 3\nov.txt-6- 4\nov.txt-7- 5\nov.txt-8- 6\nov.txt:9: m3\nov.txt-10- 7"
    );
    assert_eq!(
        result(&f, "eof").0,
        "eof.txt-1- a\neof.txt-2- b\neof.txt:3: end"
    );
    assert_eq!(
        result(&f, "cr").0,
        "cr.txt-1- a\ncr.txt:2: x1\rmid\ncr.txt-3- b"
    );
    assert_eq!(
        result(&f, "win").0,
        "ov.txt-1- 1\nov.txt:2: m1\nov.txt-3- 2\nov.txt-4- m2\n\n[1 matches limit reached. Use limit=2 for more, or refine pattern]"
    );
    let (_w, f) = run_calls("0.87", &calls, setup);
    assert_eq!(
        result(&f, "eof").0,
        "eof.txt-1- a\neof.txt-2- b\neof.txt:3: end\neof.txt-4- "
    );
    assert_eq!(
        result(&f, "cr").0,
        "cr.txt-1- a\ncr.txt:2: x1\ncr.txt-3- mid"
    );
}

#[test]
fn a_limit_notice_needs_one_more_result_under_16() {
    for compat in ALL {
        let (_w, f) = run_calls(
            compat,
            &[
                (
                    "g",
                    "grep",
                    r#"{"pattern":"hit","path":"one.txt","limit":2}"#,
                ),
                ("f", "find", r#"{"pattern":"*.txt","path":"one","limit":1}"#),
                (
                    "g15",
                    "grep",
                    r#"{"pattern":"hit","path":"one","limit":1.5}"#,
                ),
            ],
            |w| {
                write(w, "one.txt", "hit a\nno\nhit b\n");
                write(w, "one/one.txt", "hit a\nno\nhit b\n");
            },
        );
        let v16 = compat == "1.6";
        assert_eq!(
            result(&f, "g").0,
            if v16 {
                "one.txt:1: hit a\none.txt:3: hit b"
            } else {
                "one.txt:1: hit a\none.txt:3: hit b\n\n[2 matches limit reached. Use limit=4 for more, or refine pattern]"
            },
            "{compat}"
        );
        assert_eq!(
            result(&f, "f").0,
            if v16 {
                "one.txt"
            } else {
                "one.txt\n\n[1 results limit reached. Use limit=2 for more, or refine pattern]"
            },
            "{compat}"
        );
        assert_eq!(
            result(&f, "g15").0,
            if v16 {
                "one.txt:1: hit a\n\n[1 matches limit reached. Use limit=2 for more, or refine pattern]"
            } else {
                "one.txt:1: hit a\none.txt:3: hit b\n\n[1.5 matches limit reached. Use limit=3 for more, or refine pattern]"
            },
            "{compat}"
        );
    }
}

#[test]
fn parallel_edits_of_one_file_take_turns_in_call_order() {
    let n = 6;
    let calls: Vec<(String, String)> = (0..n)
        .map(|i| {
            (
                format!("e{i}"),
                format!(
                    r#"{{"path":"f.txt","edits":[{{"oldText":"line{i}\n","newText":"LINE{i}\n"}}]}}"#
                ),
            )
        })
        .collect();
    let refs: Vec<(&str, &str, &str)> = calls
        .iter()
        .map(|(id, a)| (id.as_str(), "edit", a.as_str()))
        .collect();
    let content: String = (0..n).map(|i| format!("line{i}\n")).collect();
    for compat in ALL {
        let (w, f) = run_calls(compat, &refs, |w| write(w, "f.txt", &content));
        for i in 0..n {
            assert_eq!(
                result(&f, &format!("e{i}")),
                ("Successfully replaced 1 block(s) in f.txt.".into(), false),
                "{compat} e{i}"
            );
            // Each edit saw every edit called before it.
            let diff = tool_end(&f, &format!("e{i}"))["result"]["details"]["diff"]
                .as_str()
                .unwrap()
                .to_string();
            if i > 0 {
                assert!(
                    diff.contains(&format!(" {i} LINE{}", i - 1)),
                    "{compat} {diff}"
                );
            }
        }
        let want: String = (0..n).map(|i| format!("LINE{i}\n")).collect();
        assert_eq!(
            std::fs::read_to_string(w.cwd().join("f.txt")).unwrap(),
            want
        );
    }
}
