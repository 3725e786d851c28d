//! `stallscope inject evict FILE…` and `resident FILE…`: drop files from the page cache, and
//! report how much of them is there.

use anyhow::{Context, Result};
use procwatch::pagecache;
use std::path::PathBuf;

#[derive(clap::Args, Debug, Clone)]
pub struct EvictArgs {
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
}

#[derive(clap::Args, Debug, Clone)]
pub struct ResidentArgs {
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// One JSON object per file.
    #[arg(long)]
    pub json: bool,
}

pub fn evict(a: EvictArgs) -> Result<i32> {
    for f in &a.files {
        pagecache::evict(f).with_context(|| format!("{}: cannot evict it", f.display()))?;
        let r = pagecache::residency(f)
            .with_context(|| format!("{}: cannot read its residency", f.display()))?;
        println!(
            "{}: evicted; {}/{} pages resident now",
            f.display(),
            r.resident_pages,
            r.total_pages
        );
    }
    Ok(0)
}

pub fn resident(a: ResidentArgs) -> Result<i32> {
    for f in &a.files {
        let r = pagecache::residency(f)
            .with_context(|| format!("{}: cannot read its residency", f.display()))?;
        if a.json {
            println!(
                "{}",
                serde_json::json!({"file": f, "resident_pages": r.resident_pages, "total_pages": r.total_pages, "page_size": r.page_size, "percent": r.percent()})
            );
        } else {
            println!(
                "{}: {}/{} pages resident ({:.1}%)",
                f.display(),
                r.resident_pages,
                r.total_pages,
                r.percent()
            );
        }
    }
    Ok(0)
}
