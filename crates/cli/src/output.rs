//! How answers are shown: `-o json|yaml|table`, after an optional JMESPath `--query`.
//! Tables pick each command's few telling columns; after a `--query` the shape is the
//! query's, so the table is built from whatever keys it has.

use clap::{Args, ValueEnum};
use comfy_table::{Table, presets};
use serde_json::Value;

use crate::error::CliError;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Format {
    #[default]
    Table,
    Json,
    Yaml,
}

#[derive(Args, Clone, Debug, Default)]
pub struct OutputArgs {
    /// How to print answers.
    #[arg(long, short = 'o', global = true, value_enum, default_value_t = Format::Table)]
    pub output: Format,
    /// A JMESPath expression applied to the answer before printing (e.g. `[].name`).
    #[arg(long, global = true)]
    pub query: Option<String>,
}

/// A table column: its header and the dotted path of its value in each row.
pub type Column = (&'static str, &'static str);

impl OutputArgs {
    /// Prints `value` to stdout; `columns` shape the default table.
    pub fn print(&self, value: &Value, columns: &[Column]) -> Result<(), CliError> {
        let text = self.render(value, columns)?;
        if !text.is_empty() {
            println!("{}", text.trim_end());
        }
        Ok(())
    }

    /// Whether answers print as the default table (no `--query` reshaping them).
    pub fn shows_table(&self) -> bool {
        self.output == Format::Table && self.query.is_none()
    }

    /// One streamed item as one line: its `columns` separated by two spaces, or as compact
    /// JSON (after `--query`) when the output is not the default table.
    pub fn line(&self, value: &Value, columns: &[Column]) -> Result<String, CliError> {
        if self.query.is_some() || self.output != Format::Table {
            let shown = match &self.query {
                Some(expr) => query(expr, value)?,
                None => value.clone(),
            };
            return serde_json::to_string(&shown).map_err(|e| CliError::Local(e.to_string()));
        }
        let fields: Vec<&str> = columns.iter().map(|(_, path)| at(value, path).as_str().unwrap_or("-")).collect();
        Ok(fields.join("  "))
    }

    pub fn render(&self, value: &Value, columns: &[Column]) -> Result<String, CliError> {
        let (value, columns) = match &self.query {
            Some(expr) => (query(expr, value)?, &[][..]),
            None => (value.clone(), columns),
        };
        match self.output {
            Format::Json => serde_json::to_string_pretty(&value).map_err(|e| CliError::Local(e.to_string())),
            Format::Yaml => serde_yaml_ng::to_string(&value).map_err(|e| CliError::Local(e.to_string())),
            Format::Table => Ok(table(&value, columns)),
        }
    }
}

pub fn query(expr: &str, value: &Value) -> Result<Value, CliError> {
    let compiled = jmespath::compile(expr).map_err(|e| CliError::Usage(format!("--query: {e}")))?;
    let found = compiled.search(value.clone()).map_err(|e| CliError::Usage(format!("--query: {e}")))?;
    serde_json::to_value(&*found).map_err(|e| CliError::Local(e.to_string()))
}

/// The value at a dotted path (`properties.provisioningState`).
pub fn at<'a>(value: &'a Value, path: &str) -> &'a Value {
    path.split('.').fold(value, |v, key| v.get(key).unwrap_or(&Value::Null))
}

fn cell(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Array(items) if items.iter().all(|i| !i.is_object() && !i.is_array()) => {
            items.iter().map(cell).collect::<Vec<_>>().join(",")
        }
        other => other.to_string(),
    }
}

fn new_table(headers: Vec<String>) -> Table {
    let mut t = Table::new();
    t.load_preset(presets::NOTHING);
    t.set_header(headers);
    t
}

/// A list is one row per item; an object with no columns is one `key value` row per field.
fn table(value: &Value, columns: &[Column]) -> String {
    match value {
        Value::Array(rows) if !columns.is_empty() => {
            let mut t = new_table(columns.iter().map(|(h, _)| h.to_string()).collect());
            for row in rows {
                t.add_row(columns.iter().map(|(_, p)| cell(at(row, p))).collect::<Vec<_>>());
            }
            t.to_string()
        }
        Value::Array(rows) if rows.iter().all(Value::is_object) && !rows.is_empty() => {
            let keys: Vec<String> = rows[0]
                .as_object()
                .map(|o| o.iter().filter(|(_, v)| !v.is_object() && !v.is_array()).map(|(k, _)| k.clone()).collect())
                .unwrap_or_default();
            let mut t = new_table(keys.clone());
            for row in rows {
                t.add_row(keys.iter().map(|k| cell(&row[k])).collect::<Vec<_>>());
            }
            t.to_string()
        }
        Value::Array(rows) => rows.iter().map(cell).collect::<Vec<_>>().join("\n"),
        Value::Object(_) if !columns.is_empty() => {
            let mut t = new_table(columns.iter().map(|(h, _)| h.to_string()).collect());
            t.add_row(columns.iter().map(|(_, p)| cell(at(value, p))).collect::<Vec<_>>());
            t.to_string()
        }
        Value::Object(fields) => {
            let mut t = Table::new();
            t.load_preset(presets::NOTHING);
            for (k, v) in fields {
                t.add_row(vec![k.clone(), cell(v)]);
            }
            t.to_string()
        }
        scalar => cell(scalar),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(output: Format, query: Option<&str>) -> OutputArgs {
        OutputArgs { output, query: query.map(str::to_string) }
    }

    #[test]
    fn a_query_shapes_the_answer_before_it_is_printed() {
        let v = json!([{"name": "a", "n": 1}, {"name": "b", "n": 2}]);
        assert_eq!(args(Format::Json, Some("[].name")).render(&v, &[]).unwrap(), "[\n  \"a\",\n  \"b\"\n]");
        assert!(matches!(args(Format::Json, Some("[")).render(&v, &[]), Err(CliError::Usage(_))));
    }

    #[test]
    fn tables_show_the_chosen_columns_and_yaml_is_yaml() {
        let v = json!([{"name": "a", "properties": {"provisioningState": "Succeeded"}}]);
        let text = args(Format::Table, None)
            .render(&v, &[("NAME", "name"), ("STATE", "properties.provisioningState")])
            .unwrap();
        assert!(text.contains("NAME") && text.contains("Succeeded"), "{text}");
        assert_eq!(args(Format::Yaml, None).render(&json!({"a": 1}), &[]).unwrap(), "a: 1\n");
    }
}
