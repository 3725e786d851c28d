//! Output formats, one file each, behind one trait ([`Render`]), as hyperfine's `export`: a log
//! analysis as text ([`logs`]), JSON or CSV; a recording's diagnosis as text ([`diagnosis`]), JSON
//! or HTML; a lab run as text ([`lab`]), JSON or HTML ([`html`]); the JVMs on the host as text
//! ([`jvms`]) or JSON.
//!
//! Invariant: renderers only read the plain view types ([`doctor::Report`],
//! [`::lab::model::LabResult`], [`::logs::view::LogsView`], [`html::view::RecordingView`],
//! [`jvms::JvmList`]);
//! they never compute analysis. What the libraries notice on the way reaches stderr through
//! [`notices`], one line each.

pub mod csv;
pub mod diagnosis;
pub mod html;
pub mod json;
pub mod jvms;
pub mod lab;
pub mod logs;

use std::io;

/// Where a recorded process ran, in one line (`pod shop/orders-…, container orders-api (…)`), as
/// the node's reader says it of a live one.
pub fn pod_line(p: &recording::Pod) -> String {
    let recording::Pod { namespace, name, uid, container, container_id, runtime, source } =
        p.clone();
    procwatch::pods::Pod { namespace, name, uid, container, container_id, runtime, source }
        .describe()
}

/// The sink the libraries tell what they noticed (progress, warnings): stderr, one line each,
/// `source: text`, as stallscope has always printed them.
pub fn notices() -> recording::Notices {
    recording::Notices::new(|n| eprintln!("{n}"))
}

/// One format of one kind of result `V`. A streamed result (a log analysis) also hands each
/// record `I` to the format as it is read, so a format that writes per record (CSV) needs no
/// memory for them; the others wait for `finish`.
pub trait Render<V: ?Sized, I = ()> {
    /// One record, in the order read.
    fn item(&mut self, _item: &I) -> io::Result<()> {
        Ok(())
    }
    /// The whole result, once, after the last record.
    fn finish(&mut self, view: &V) -> io::Result<()>;
}
