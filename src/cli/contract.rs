//! The JSON shapes the commands print with `-o json`, from one definition: the `Serialize` types
//! themselves, through their `JsonSchema` derive (schemars, in its serialize contract: a field is
//! required when it is always written). The man pages' JSON OUTPUT sections are rendered from
//! these schemas ([`render`]), and the integration tests check what the real commands print
//! against them ([`check`]), so neither can drift from the code.

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema};
use serde_json::{Map, Value};

/// One shape a command prints: its name in the man pages (the command's words, which also say
/// which page it belongs to), the schema.
pub struct Shape {
    pub name: &'static str,
    /// For a list, the name other shapes call its element by (`[audit], where audit is ...`).
    pub element: Option<&'static str>,
    pub schema: Schema,
}

/// The schema of what `T` serializes to.
fn schema_of<T: JsonSchema>() -> Schema {
    SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator()
        .into_root_schema_for::<T>()
}

fn list<T: JsonSchema>(name: &'static str, element: &'static str) -> Shape {
    Shape {
        name,
        element: Some(element),
        schema: schema_of::<Vec<T>>(),
    }
}

fn one<T: JsonSchema>(name: &'static str) -> Shape {
    Shape {
        name,
        element: None,
        schema: schema_of::<T>(),
    }
}

/// Every shape a command prints with `-o json`, rendered from the type it serializes, by command
/// and in the order its man page lists them.
pub fn shapes() -> Vec<Shape> {
    use super::{backfill, claim, cron, expire, fire, inspect, migrate, pause};
    use crate::bench::{BenchReport, steady::SteadyReport};
    use crate::store::migrate::{MigrateReport, MigrationStatus};
    use crate::store::misfires::MisfireRecord;
    use crate::store::read::{AuditView, RunDetail, RunRow, ScheduleRow};
    use crate::store::recovery::RecoveryReport;
    use crate::store::replicas::ReplicaView;
    vec![
        one::<MigrateReport>("migrate up"),
        list::<MigrationStatus>("migrate status", "migration"),
        one::<migrate::VerifyReport>("migrate verify"),
        one::<super::publish::PublishShown>("publish"),
        one::<claim::ClaimReport>("claim"),
        one::<claim::AdmitReport>("claim admit"),
        one::<claim::ReleaseReport>("claim release"),
        one::<inspect::SummaryReport>("inspect"),
        one::<inspect::CheckReport>("inspect --check"),
        one::<inspect::LoadReport>("inspect load"),
        list::<ReplicaView>("inspect replicas", "replica"),
        list::<ScheduleRow>("inspect schedules", "schedule"),
        list::<inspect::ClaimShown>("inspect claims", "claim"),
        list::<RunRow>("inspect runs", "run"),
        one::<RunDetail>("inspect run"),
        one::<inspect::TriggerShown<'static>>("inspect trigger"),
        one::<RecoveryReport>("inspect recovery"),
        one::<inspect::InvariantReport>("inspect invariants"),
        list::<AuditView>("inspect audit", "audit"),
        list::<MisfireRecord>("inspect misfires", "misfire"),
        one::<cron::CronReport>("cron"),
        one::<fire::FireReport>("fire"),
        one::<backfill::BackfillReport>("backfill"),
        one::<pause::Report>("pause"),
        one::<pause::Report>("resume"),
        one::<expire::ExpireReport>("expire"),
        one::<BenchReport>("bench"),
        one::<SteadyReport>("bench --steady"),
    ]
}

/// The shapes of the page of `page` (a command's words: `inspect`, `inspect audit`), rendered:
/// `name: shape` a paragraph. A command's own page lists every shape of its family; a nested
/// page (`inspect audit`, `migrate up`) only its own, so `man qlsched-inspect-audit` is not
/// buried under the other ten views.
pub fn section(page: &str) -> Option<String> {
    let paragraphs: Vec<String> = shapes()
        .iter()
        .filter(|s| on_page(s.name, page))
        .map(|s| match (s.element, s.schema.get("items")) {
            (Some(element), Some(items)) => {
                let item = Schema::try_from(items.clone()).unwrap_or_default();
                let mut item = item.to_value();
                if let (Some(object), Some(defs)) = (item.as_object_mut(), s.schema.get("$defs")) {
                    object.insert("$defs".into(), defs.clone());
                }
                let item = Schema::try_from(item).unwrap_or_default();
                format!(
                    "{}: [{element}], where {element} is {}",
                    s.name,
                    render(&item)
                )
            }
            _ => format!("{}: {}", s.name, render(&s.schema)),
        })
        .collect();
    (!paragraphs.is_empty()).then(|| paragraphs.join("\n\n"))
}

/// Whether what `words` names (`inspect audit`, `bench --steady`) is shown on the page of `page`:
/// its own, or its command's (`inspect`), which shows the whole family.
pub fn on_page(words: &str, page: &str) -> bool {
    words == page || words.split(' ').next() == Some(page)
}

/// A compact, readable rendering of a schema: `{"field": type (description), ...}` (fields in
/// alphabetical order, as serde_json keeps a schema's properties), `[item]`,
/// `T|null`, `"a"|"b"` for a closed set of words, `any` for any JSON value.
pub fn render(schema: &Schema) -> String {
    let root = schema.as_value();
    let defs = root.get("$defs").and_then(Value::as_object);
    Renderer { defs }.value(root)
}

struct Renderer<'a> {
    defs: Option<&'a Map<String, Value>>,
}

impl Renderer<'_> {
    fn resolve<'v>(&'v self, schema: &'v Value) -> &'v Value {
        match schema.get("$ref").and_then(Value::as_str) {
            Some(reference) => reference
                .strip_prefix("#/$defs/")
                .and_then(|name| self.defs?.get(name))
                .unwrap_or(schema),
            None => schema,
        }
    }

    fn value(&self, schema: &Value) -> String {
        let schema = self.resolve(schema);
        let Some(object) = schema.as_object() else {
            // `true`: anything.
            return "any".to_owned();
        };
        if let Some(words) = object.get("enum").and_then(Value::as_array) {
            return words
                .iter()
                .map(|w| w.to_string())
                .collect::<Vec<_>>()
                .join("|");
        }
        if let Some(word) = object.get("const") {
            return word.to_string();
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(alternatives) = object.get(key).and_then(Value::as_array) {
                return alternatives
                    .iter()
                    .map(|a| self.value(a))
                    .collect::<Vec<_>>()
                    .join("|");
            }
        }
        let types: Vec<&str> = match object.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if types.is_empty() {
            return "any".to_owned();
        }
        types
            .iter()
            .map(|t| self.typed(t, object))
            .collect::<Vec<_>>()
            .join("|")
    }

    fn typed(&self, kind: &str, object: &Map<String, Value>) -> String {
        match kind {
            "object" => self.object(object),
            "array" => match object.get("items") {
                Some(items) => format!("[{}]", self.value(items)),
                None => "[any]".to_owned(),
            },
            "integer" => "int".to_owned(),
            "boolean" => "bool".to_owned(),
            "string" if object.get("format").and_then(Value::as_str) == Some("uuid") => {
                "uuid".to_owned()
            }
            other => other.to_owned(),
        }
    }

    fn object(&self, object: &Map<String, Value>) -> String {
        let Some(properties) = object.get("properties").and_then(Value::as_object) else {
            return "object".to_owned();
        };
        let required = required(object);
        let fields: Vec<String> = properties
            .iter()
            .map(|(name, schema)| {
                let mut field = format!("\"{name}\": {}", self.value(schema));
                let mut notes = Vec::new();
                if let Some(description) = schema.get("description").and_then(Value::as_str) {
                    notes.push(note(description));
                }
                if !required.contains(&name.as_str()) {
                    notes.push("absent when it does not apply".to_owned());
                }
                if !notes.is_empty() {
                    field.push_str(&format!(" ({})", notes.join("; ")));
                }
                field
            })
            .collect();
        format!("{{{}}}", fields.join(", "))
    }
}

/// A doc comment as a note in parentheses: one line, no markup, no capital or full stop.
fn note(description: &str) -> String {
    let text = description
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('`', "");
    let text = text.strip_suffix('.').unwrap_or(&text);
    let mut chars = text.chars();
    match (chars.next(), chars.next()) {
        (Some(first), Some(second)) if first.is_uppercase() && !second.is_uppercase() => {
            first.to_lowercase().chain(text.chars().skip(1)).collect()
        }
        _ => text.to_owned(),
    }
}

fn required(object: &Map<String, Value>) -> Vec<&str> {
    object
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// Where `value` departs from `schema`, strictly: a field the schema does not name is a
/// departure too (an undocumented field is drift). Empty when it conforms.
///
/// A structural check of the keywords schemars writes (`type`, `properties`, `required`,
/// `items`, `enum`, `const`, `anyOf`, `oneOf`, `$ref`, `format: uuid`), not a general JSON Schema
/// validator.
pub fn check(schema: &Schema, value: &Value) -> Vec<String> {
    let root = schema.as_value();
    let renderer = Renderer {
        defs: root.get("$defs").and_then(Value::as_object),
    };
    let mut problems = Vec::new();
    conform(&renderer, root, value, "$", &mut problems);
    problems
}

fn conform(r: &Renderer<'_>, schema: &Value, value: &Value, path: &str, out: &mut Vec<String>) {
    let schema = r.resolve(schema);
    let Some(object) = schema.as_object() else {
        if schema == &Value::Bool(false) {
            out.push(format!("{path}: nothing is allowed here"));
        }
        return;
    };
    if let Some(words) = object.get("enum").and_then(Value::as_array)
        && !words.contains(value)
    {
        out.push(format!(
            "{path}: {value} is none of {}",
            Value::from(words.clone())
        ));
    }
    if let Some(word) = object.get("const")
        && word != value
    {
        out.push(format!("{path}: {value} is not {word}"));
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(alternatives) = object.get(key).and_then(Value::as_array) {
            let mut closest: Option<Vec<String>> = None;
            for alternative in alternatives {
                let mut problems = Vec::new();
                conform(r, alternative, value, path, &mut problems);
                if problems.is_empty() {
                    closest = None;
                    break;
                }
                if closest.as_ref().is_none_or(|c| problems.len() < c.len()) {
                    closest = Some(problems);
                }
            }
            out.extend(closest.unwrap_or_default());
        }
    }
    let types: Vec<&str> = match object.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => return,
    };
    let matches = |kind: &str| match kind {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "string" => value.is_string(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        _ => true,
    };
    if !types.iter().any(|t| matches(t)) {
        out.push(format!("{path}: {value} is not {}", types.join("|")));
        return;
    }
    match value {
        Value::String(text)
            if object.get("format").and_then(Value::as_str) == Some("uuid")
                && uuid::Uuid::parse_str(text).is_err() =>
        {
            out.push(format!("{path}: {text:?} is not a uuid"));
        }
        Value::Array(items) => {
            if let Some(item) = object.get("items") {
                for (at, element) in items.iter().enumerate() {
                    conform(r, item, element, &format!("{path}[{at}]"), out);
                }
            }
        }
        Value::Object(fields) => {
            let properties = object.get("properties").and_then(Value::as_object);
            for name in required(object) {
                if !fields.contains_key(name) {
                    out.push(format!("{path}: no field {name:?}"));
                }
            }
            for (name, field) in fields {
                match properties.and_then(|p| p.get(name)) {
                    Some(property) => conform(r, property, field, &format!("{path}.{name}"), out),
                    None if properties.is_some() => {
                        out.push(format!("{path}: field {name:?} is not in the schema"));
                    }
                    None => {}
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A field's description is read by whoever reads the man page: no rustdoc link to a name
    /// of the code, no pointer into the repository's documents, and the figures it states are
    /// those of the code.
    #[test]
    fn every_shape_reads_as_a_man_page() {
        for shape in shapes() {
            let text = render(&shape.schema);
            for leak in ["[`", "`]", "docs/", "§", "crate::", "core::", "store::"] {
                assert!(!text.contains(leak), "{}: {leak:?} in {text}", shape.name);
            }
        }
        let inspect = section("inspect").expect("inspect's shapes");
        let listed = crate::store::accounting::MAX_LISTED;
        assert!(
            inspect.contains(&format!("at most {listed} listed")),
            "{inspect}"
        );
        let claim = section("claim").expect("claim's shapes");
        let counted = crate::core::decide::MAX_COUNTED_MISFIRES;
        let counted = format!("more than {},{:03}", counted / 1000, counted % 1000);
        assert!(claim.contains(&counted), "{claim}");
    }

    /// A command's page lists its family's shapes; a nested page only its own.
    #[test]
    fn a_nested_page_lists_only_its_own_shape() {
        let family = section("inspect").expect("inspect's shapes");
        let own = section("inspect audit").expect("inspect audit's shape");
        assert!(
            family.contains("inspect replicas: [replica]")
                && family.contains("inspect audit: [audit]")
        );
        assert!(own.starts_with("inspect audit: [audit]"), "{own}");
        assert!(!own.contains("inspect replicas"), "{own}");
        assert_eq!(
            section("migrate up").map(|s| s.starts_with("migrate up: ")),
            Some(true)
        );
        assert_eq!(section("top"), None);
        // The notes beside the shapes go the same way.
        let notes = crate::cli::manual::json_section;
        assert_eq!(
            notes("inspect audit").as_deref(),
            Some("inspect audit lists newest first.")
        );
        let family = notes("inspect").expect("inspect's notes");
        assert!(
            family.contains("schema_problem") && family.contains("kept 7 days"),
            "{family}"
        );
        assert_eq!(notes("migrate up"), None);
        assert!(notes("fire").is_some_and(|n| n.contains("idempotency key")));
    }

    #[derive(serde::Serialize, schemars::JsonSchema)]
    struct Example {
        /// The id.
        id: uuid::Uuid,
        count: i64,
        note: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        extra: Option<bool>,
        #[schemars(extend("enum" = ["a", "b"]))]
        word: String,
        items: Vec<Inner>,
    }

    #[derive(serde::Serialize, schemars::JsonSchema)]
    struct Inner {
        at_ms: i64,
    }

    #[test]
    fn renders_fields_types_nullability_and_words() {
        assert_eq!(
            render(&schema_of::<Example>()),
            "{\"count\": int, \"extra\": bool|null (absent when it does not apply), \"id\": uuid \
             (the id), \"items\": [{\"at_ms\": int}], \"note\": string|null, \"word\": \"a\"|\"b\"}"
        );
    }

    #[test]
    fn checks_what_a_command_printed() {
        let schema = schema_of::<Example>();
        let good = json!({"id": uuid::Uuid::nil(), "count": 1, "note": null, "word": "a",
            "items": [{"at_ms": 5}]});
        assert_eq!(check(&schema, &good), Vec::<String>::new());
        let bad = json!({"id": "x", "count": 1.5, "word": "c", "new": 1,
            "items": [{"at_ms": 5, "late": true}]});
        let problems = check(&schema, &bad);
        for expected in [
            "$: no field \"note\"",
            "$: field \"new\" is not in the schema",
            "$.id: \"x\" is not a uuid",
            "$.count: 1.5 is not integer",
            "$.word: \"c\" is none of [\"a\",\"b\"]",
            "$.items[0]: field \"late\" is not in the schema",
        ] {
            assert!(
                problems.iter().any(|p| p == expected),
                "{expected} not in {problems:#?}"
            );
        }
    }

    /// The audit actions the man page lists are those the database accepts.
    #[test]
    fn audit_actions_are_those_the_migrations_allow() {
        let schema = schema_of::<crate::store::read::AuditView>();
        let action = &schema.as_value()["properties"]["action"]["enum"];
        let migration = include_str!("../../migrations/0005_operator_control.sql");
        let check = migration
            .split("CHECK (action IN (")
            .nth(1)
            .and_then(|rest| rest.split("))").next())
            .unwrap_or_default();
        let allowed: Vec<String> = check
            .split(',')
            .map(|w| w.trim().trim_matches('\'').to_owned())
            .collect();
        assert_eq!(action, &json!(allowed));
    }
}
