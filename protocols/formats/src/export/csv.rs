//! CSV, one line per event: time, end, category, type, producer, CPU, depth, link target, value,
//! parameters (`name=value` joined by `;`).

use std::io::Write;

use super::{Category, EventView, ExportError, Index, Kind, TraceView};

fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Writes `view` to `out`; the number of events written.
pub fn write(view: &dyn TraceView, out: &mut dyn Write) -> Result<u64, ExportError> {
    let index = Index::new(view);
    writeln!(
        out,
        "ts_ns,end_ns,category,type,producer,cpu,depth,target,value,params"
    )?;
    view.for_each_event(&mut |e: &EventView| {
        let (depth, target, value) = match e.kind {
            Kind::State { depth, .. } => (depth.to_string(), String::new(), String::new()),
            Kind::Link { target, .. } => {
                (String::new(), index.producer_name(target), String::new())
            }
            Kind::Variable { value } => (String::new(), String::new(), value.to_string()),
            Kind::Punctual => Default::default(),
        };
        let category = match e.kind {
            Kind::Punctual => Category::Punctual,
            Kind::State { .. } => Category::State,
            Kind::Link { .. } => Category::Link,
            Kind::Variable { .. } => Category::Variable,
        };
        let params: Vec<String> = index
            .param_names(e.type_id)
            .iter()
            .zip(&e.params)
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{}",
            e.ts,
            e.end(),
            category.name(),
            field(&index.type_name(e.type_id)),
            field(&index.producer_name(e.producer)),
            e.cpu.map_or_else(String::new, |c| c.to_string()),
            depth,
            field(&target),
            value,
            field(&params.join(";"))
        )?;
        Ok(())
    })
}
