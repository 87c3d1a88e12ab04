//! Skills, prompt templates and `get_commands`, checked against pi.
//!
//! The replay tests run each scenario of `tests/scenarios/skills/` against pith and compare what
//! pith writes and sends to the model with pi 0.73.1's recorded answers
//! (`fixtures/skills/pi-0.73.1/`, made with `tests/scenarios/skills/record.py`).

mod support;

use support::scenario::check;

fn pi073(name: &str) {
    check("skills", name, "skills/pi-0.73.1", &[]);
}

#[test]
fn every_location_discovery_rule_and_the_prompt_listing() {
    pi073("sk_locations");
}

#[test]
fn settings_entries_global_and_project_with_patterns() {
    pi073("sk_settings");
}

#[test]
fn legacy_settings_form() {
    pi073("sk_settings_legacy");
}

#[test]
fn enable_skill_commands_false_changes_nothing_in_rpc_mode() {
    pi073("sk_enable_skill_commands");
}

#[test]
fn cli_paths() {
    pi073("sk_cli");
}

#[test]
fn no_skills_and_no_prompt_templates_keep_explicit_paths() {
    pi073("sk_cli_no_flags");
}

#[test]
fn short_flags() {
    pi073("sk_cli_short_flags");
}

#[test]
fn template_argument_forms_and_quoting() {
    pi073("sk_template_args");
}

#[test]
fn skill_command_expansion() {
    pi073("sk_skill_expand");
}

#[test]
fn expansion_in_steer_follow_up_and_queue_update() {
    pi073("sk_steer_follow_up");
}

#[test]
fn expansion_of_messages_queued_while_idle() {
    pi073("sk_idle_queue");
}

#[test]
fn no_listing_without_the_read_tool() {
    pi073("sk_prompt_no_read");
}

#[test]
fn listing_with_only_the_read_tool() {
    pi073("sk_prompt_read_only");
}

#[test]
fn listing_after_a_custom_system_prompt() {
    pi073("sk_prompt_custom");
}

#[test]
fn no_listing_when_every_skill_is_hidden() {
    pi073("sk_prompt_hidden_only");
}

#[test]
fn nothing_to_list() {
    pi073("sk_prompt_none");
}

#[test]
fn broken_frontmatter_is_skipped_and_valid_yaml_forms_load() {
    pi073("sk_bad_files");
}

#[test]
fn ignore_files_in_skill_and_prompt_directories() {
    pi073("sk_ignore_files");
}
