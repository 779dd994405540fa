//! `include/socscope_agent.h` against the Rust side, so the two cannot drift: every exported function's
//! name, parameter types and return type; every `#[repr(C)]` struct's fields and their layout (sizes and
//! offsets measured by a C program compiled with the system `cc`); every status and size constant.

use std::collections::BTreeMap;
use std::mem::{offset_of, size_of};
use std::path::{Path, PathBuf};
use std::process::Command;

use socscope_agent_capi::{CConfig, CParam, CStats, CValue};
use socscope_wire::dict::{ParamType, ProducerKind};

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn header() -> String {
    std::fs::read_to_string(crate_dir().join("include/socscope_agent.h")).expect("the header")
}

fn rust_source() -> String {
    std::fs::read_to_string(crate_dir().join("src/lib.rs")).expect("the source")
}

/// `a  b\n c` → `a b c`.
fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A C type written without spaces around `*`: `const char *` → `const char*`.
fn c_type(s: &str) -> String {
    squash(s).replace(" *", "*").replace("* ", "*")
}

/// The C type a Rust type of the API stands for.
fn c_of_rust(t: &str) -> String {
    let t = squash(t);
    let c = match t.as_str() {
        "*mut Instance" => "socscope_agent*",
        "*mut *mut Instance" => "socscope_agent**",
        "*const CConfig" => "const socscope_config*",
        "*const CParam" => "const socscope_param*",
        "*const CValue" => "const socscope_value*",
        "*mut CStats" => "socscope_stats*",
        "*const c_char" => "const char*",
        "*mut c_void" => "void*",
        "*const u8" => "const uint8_t*",
        "*mut u8" => "uint8_t*",
        "*mut *const u8" => "const uint8_t**",
        "*mut usize" => "size_t*",
        "ClockFn" => "socscope_clock_fn",
        "WriteFn" => "socscope_write_fn",
        "c_int" => "int",
        "usize" => "size_t",
        "u16" => "uint16_t",
        "u32" => "uint32_t",
        "u64" => "uint64_t",
        "i64" => "int64_t",
        "f64" => "double",
        other => panic!("no C type known for the Rust type {other:?}"),
    };
    c.to_string()
}

/// `name → (return type, parameter types)` of the header's prototypes.
fn header_functions(h: &str) -> BTreeMap<String, (String, Vec<String>)> {
    let mut out = BTreeMap::new();
    // Prototypes start at the beginning of a line with a return type and `socscope_`, and end with `);`.
    let mut rest = h;
    while let Some(start) = ["\nint socscope_", "\nsize_t socscope_"]
        .iter()
        .filter_map(|p| rest.find(p))
        .min()
    {
        let decl_start = start + 1;
        let end = rest[decl_start..]
            .find(';')
            .expect("a prototype ends with ;")
            + decl_start;
        let decl = squash(&rest[decl_start..end]);
        rest = &rest[end..];
        let (head, params) = decl.split_once('(').expect("a prototype has parameters");
        let params = params.strip_suffix(')').expect("parameters end with )");
        let (ret, name) = head.rsplit_once(' ').expect("return type and name");
        let params = if params == "void" {
            Vec::new()
        } else {
            params
                .split(',')
                .map(|p| {
                    let p = c_type(p);
                    // Drop the parameter name: the last identifier after the type.
                    let cut = p.rfind(['*', ' ']).expect("a named parameter");
                    c_type(&p[..=cut])
                })
                .collect()
        };
        assert!(
            out.insert(name.to_string(), (ret.to_string(), params))
                .is_none(),
            "{name} declared twice"
        );
    }
    out
}

/// The same for the Rust source: `extern "C" fn` items and `record_fn!` invocations.
fn rust_functions(src: &str) -> BTreeMap<String, (String, Vec<String>)> {
    let mut out = BTreeMap::new();
    for marker in ["pub unsafe extern \"C\" fn ", "pub extern \"C\" fn "] {
        let mut rest = src;
        while let Some(i) = rest.find(marker) {
            rest = &rest[i + marker.len()..];
            let name_end = rest.find('(').expect("fn name");
            let name = rest[..name_end].trim().to_string();
            if name.starts_with('$') {
                continue; // the macro's template
            }
            let body_start = rest.find('{').expect("fn body");
            let sig = squash(&rest[name_end + 1..body_start]);
            let (params, ret) = sig.rsplit_once(')').expect("parameter list");
            let ret = ret
                .trim()
                .strip_prefix("->")
                .map_or("void".into(), c_of_rust);
            let params = params
                .split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(|p| c_of_rust(p.split_once(':').expect("name: type").1))
                .collect();
            out.insert(name, (ret, params));
        }
    }
    let mut rest = src;
    while let Some(i) = rest.find("record_fn!(") {
        rest = &rest[i + "record_fn!(".len()..];
        let at = rest
            .find("socscope_")
            .expect("a record_fn! names its function");
        let rest2 = &rest[at..];
        let name_end = rest2.find('(').expect("its parameters");
        let name = rest2[..name_end].to_string();
        let params_end = rest2.find(')').expect("the end of its parameters");
        let mut params = vec!["socscope_agent*".to_string(), "uint16_t".to_string()];
        params.extend(
            rest2[name_end + 1..params_end]
                .split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(|p| c_of_rust(p.split_once(':').expect("name: type").1)),
        );
        out.insert(name, ("int".to_string(), params));
    }
    out
}

#[test]
fn every_function_has_the_same_signature_on_both_sides() {
    let h = header_functions(&header());
    let r = rust_functions(&rust_source());
    assert!(
        r.len() >= 26,
        "found only {} Rust functions: {r:?}",
        r.len()
    );
    assert_eq!(
        h.keys().collect::<Vec<_>>(),
        r.keys().collect::<Vec<_>>(),
        "the same functions"
    );
    for (name, sig) in &r {
        assert_eq!(&h[name], sig, "{name}: header (left) vs Rust (right)");
    }
}

/// `name → [(field, C type)]` of the header's `typedef struct`s.
fn header_structs(h: &str) -> BTreeMap<String, Vec<(String, String)>> {
    let mut out = BTreeMap::new();
    let mut rest = h;
    while let Some(i) = rest.find("typedef struct ") {
        rest = &rest[i + "typedef struct ".len()..];
        let Some(open) = rest.find('{') else { break };
        let semi = rest.find(';').unwrap_or(usize::MAX);
        if semi < open {
            continue; // the opaque agent
        }
        let name = rest[..open].trim().to_string();
        let close = rest.find('}').expect("struct end");
        let body = &rest[open + 1..close];
        let fields = body
            .lines()
            .map(|l| l.split("/*").next().unwrap_or_default().trim())
            .filter(|l| !l.is_empty())
            .map(|l| {
                let decl = c_type(l.trim_end_matches(';'));
                let cut = decl.rfind(['*', ' ']).expect("a named field");
                (decl[cut + 1..].to_string(), c_type(&decl[..=cut]))
            })
            .collect();
        out.insert(name, fields);
    }
    out
}

fn rust_structs(src: &str) -> BTreeMap<String, Vec<(String, String)>> {
    let mut out = BTreeMap::new();
    for (rust, c) in [
        ("CConfig", "socscope_config"),
        ("CParam", "socscope_param"),
        ("CValue", "socscope_value"),
        ("CStats", "socscope_stats"),
    ] {
        let start = src
            .find(&format!("pub struct {rust} {{"))
            .unwrap_or_else(|| panic!("struct {rust}"));
        let body = &src[start..];
        let body = &body[body.find('{').unwrap() + 1..body.find("\n}").unwrap()];
        let fields = body
            .lines()
            .map(str::trim)
            .filter(|l| l.starts_with("pub "))
            .map(|l| {
                let (name, ty) = l["pub ".len()..]
                    .trim_end_matches(',')
                    .split_once(':')
                    .unwrap();
                let name = if name == "ty" { "type" } else { name };
                (name.to_string(), c_of_rust(ty))
            })
            .collect();
        out.insert(c.to_string(), fields);
    }
    out
}

#[test]
fn every_struct_has_the_same_fields_on_both_sides() {
    assert_eq!(header_structs(&header()), rust_structs(&rust_source()));
}

fn header_defines(h: &str) -> BTreeMap<String, i64> {
    h.lines()
        .filter_map(|l| l.strip_prefix("#define SOCSCOPE_"))
        .filter_map(|l| {
            let (name, value) = l.split_once(' ')?;
            let value = value.trim().trim_start_matches('(').trim_end_matches(')');
            Some((name.to_string(), value.parse().ok()?))
        })
        .collect()
}

#[test]
fn every_constant_has_the_same_value_on_both_sides() {
    use socscope_agent_capi as c;
    let defines = header_defines(&header());
    let expected: &[(&str, i64)] = &[
        ("AGENT_SIZE", c::AGENT_SIZE as i64),
        ("AGENT_ALIGN", c::AGENT_ALIGN as i64),
        ("CPUS", c::CPUS as i64),
        ("BLOCK", c::BLOCK as i64),
        ("BLOCKS", c::BLOCKS as i64),
        ("PRODUCERS", c::PRODUCERS as i64),
        ("TYPES", c::TYPES as i64),
        ("OK", c::OK.into()),
        ("STORED", c::STORED.into()),
        ("DROPPED", c::DROPPED.into()),
        ("ERR_NULL", c::ERR_NULL.into()),
        ("ERR_NOT_INITIALISED", c::ERR_NOT_INITIALISED.into()),
        ("ERR_MEMORY", c::ERR_MEMORY.into()),
        ("ERR_UTF8", c::ERR_UTF8.into()),
        ("ERR_DICTIONARY_FULL", c::ERR_DICTIONARY_FULL.into()),
        ("ERR_NAME_TOO_LONG", c::ERR_NAME_TOO_LONG.into()),
        ("ERR_TOO_MANY_PARAMS", c::ERR_TOO_MANY_PARAMS.into()),
        ("ERR_RESERVED_TYPE", c::ERR_RESERVED_TYPE.into()),
        ("ERR_DUPLICATE_TYPE", c::ERR_DUPLICATE_TYPE.into()),
        ("ERR_UNKNOWN_TYPE", c::ERR_UNKNOWN_TYPE.into()),
        ("ERR_PARAM_MISMATCH", c::ERR_PARAM_MISMATCH.into()),
        ("ERR_BAD_CPU", c::ERR_BAD_CPU.into()),
        ("ERR_RECORD_TOO_LARGE", c::ERR_RECORD_TOO_LARGE.into()),
        ("ERR_BAD_ARGUMENT", c::ERR_BAD_ARGUMENT.into()),
        ("ERR_WOULD_BLOCK", c::ERR_WOULD_BLOCK.into()),
        ("ERR_CLOSED", c::ERR_CLOSED.into()),
        ("ERR_NOT_A_REFUSAL", c::ERR_NOT_A_REFUSAL.into()),
        (
            "ERR_DECLARATION_TOO_LARGE",
            c::ERR_DECLARATION_TOO_LARGE.into(),
        ),
        ("AGENT_API_VERSION", c::API_VERSION.into()),
        ("MODE_STREAM", c::MODE_STREAM.into()),
        ("MODE_POST_MORTEM", c::MODE_POST_MORTEM.into()),
        ("WRITE_OK", c::WRITE_OK.into()),
        ("WRITE_WOULD_BLOCK", c::WRITE_WOULD_BLOCK.into()),
        ("PRODUCER_PROCESS", ProducerKind::Process as i64),
        ("PRODUCER_THREAD", ProducerKind::Thread as i64),
        ("PRODUCER_IRQ", ProducerKind::Irq as i64),
        ("PRODUCER_SOFTIRQ", ProducerKind::SoftIrq as i64),
        ("PRODUCER_CPU", ProducerKind::Cpu as i64),
        ("CATEGORY_PUNCTUAL", 0),
        ("CATEGORY_STATE_ENTER", 1),
        ("CATEGORY_STATE_EXIT", 2),
        ("CATEGORY_VARIABLE", 3),
        ("PARAM_SIGNED", ParamType::Signed as i64),
        ("PARAM_UNSIGNED", ParamType::Unsigned as i64),
        ("PARAM_FLOAT", ParamType::Float as i64),
        ("PARAM_STRING", ParamType::String as i64),
        ("PARAM_ADDRESS", ParamType::Address as i64),
        (
            "FIRST_CUSTOM_TYPE",
            socscope_wire::dict::FIRST_CUSTOM_TYPE.into(),
        ),
    ];
    let expected: BTreeMap<String, i64> =
        expected.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    assert_eq!(defines, expected);
    assert!(socscope_agent_capi::socscope_agent_size() <= socscope_agent_capi::AGENT_SIZE);
}

/// Compiles `source` with the system `cc` and runs it; returns its standard output.
fn run_c(dir: &Path, source: &str, std: &str) -> String {
    let c = dir.join("probe.c");
    std::fs::write(&c, source).unwrap();
    let exe = dir.join("probe");
    let out = Command::new("cc")
        .args([std, "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(crate_dir().join("include"))
        .arg(&c)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("cc runs");
    assert!(
        out.status.success(),
        "cc failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(&exe).output().expect("the probe runs");
    assert!(run.status.success());
    String::from_utf8(run.stdout).unwrap()
}

#[test]
fn c_sees_the_same_struct_layouts() {
    let dir = tempfile::tempdir().unwrap();
    let mut src = String::from(
        "#include <stdio.h>\n#include <stddef.h>\n#include \"socscope_agent.h\"\n\
         #define F(s, f) printf(#s \".\" #f \" %zu %zu\\n\", offsetof(s, f), sizeof(((s *)0)->f));\n\
         #define S(s) printf(#s \" %zu %zu\\n\", sizeof(s), _Alignof(s));\nint main(void) {\n",
    );
    for (name, fields) in header_structs(&header()) {
        src += &format!("S({name})\n");
        for (f, _) in fields {
            src += &format!("F({name}, {f})\n");
        }
    }
    src += "return 0; }\n";
    // _Alignof needs C11.
    let printed = run_c(dir.path(), &src, "-std=c11");
    let mut rust = String::new();
    macro_rules! layout {
        ($c:literal, $t:ty, $($f:ident => $cf:literal),*) => {
            rust += &format!("{} {} {}\n", $c, size_of::<$t>(), std::mem::align_of::<$t>());
            $(
                let probe: $t = unsafe { std::mem::zeroed() };
                rust += &format!("{}.{} {} {}\n", $c, $cf, offset_of!($t, $f), std::mem::size_of_val(&probe.$f));
            )*
        };
    }
    layout!("socscope_config", CConfig, board => "board", soc => "soc", os => "os", application => "application",
        token => "token", cpu_count => "cpu_count", tick_rate_hz => "tick_rate_hz", session_id => "session_id",
        flush_latency_ticks => "flush_latency_ticks", heartbeat_ticks => "heartbeat_ticks",
        hello_every_ticks => "hello_every_ticks");
    layout!("socscope_param", CParam, name => "name", ty => "type");
    layout!("socscope_stats", CStats, records => "records", dropped => "dropped", rejected => "rejected",
        clock_regressions => "clock_regressions", frames => "frames", bytes => "bytes",
        overwritten => "overwritten");
    layout!("socscope_value", CValue, ty => "type", i => "i", u => "u", f => "f", s => "s");
    let sorted = |s: &str| {
        let mut v: Vec<String> = s.lines().map(String::from).collect();
        v.sort();
        v
    };
    assert_eq!(sorted(&printed), sorted(&rust));
}

#[test]
fn header_compiles_as_c99_with_every_warning() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_c(
        dir.path(),
        "#include \"socscope_agent.h\"\n#include <stdio.h>\nint main(void) {\n\
         socscope_value v[2] = {socscope_unsigned(1), socscope_string(\"x\")};\n\
         printf(\"%d %zu\\n\", (int)v[0].type, sizeof(socscope_config));\nreturn 0; }\n",
        "-std=c99",
    );
    assert!(out.starts_with("1 "), "{out}");
}
