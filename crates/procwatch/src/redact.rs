//! Secrets in command lines, redacted before any reaches a recording, a report, an event or a
//! served page (issue 57): the values of arguments whose names say they are secret
//! (`-Dspring.datasource.password=…`, `--token …`, `AWS_SECRET_ACCESS_KEY=…`), the password
//! of a URL (`jdbc:postgresql://app:…@db/x`) and a bearer token. `STALLSCOPE_REDACT=off` in
//! stallscope's environment keeps command lines whole.
//!
//! Invariant: a pure function of the arguments and that one variable; it only ever replaces
//! characters of an argument with [`HIDDEN`], never drops or adds an argument.

/// What a secret is replaced with.
pub const HIDDEN: &str = "***";

/// Words that make an argument's name a secret's, compared with the name in lower case with
/// `-`, `_` and `.` removed (`keyStorePassword`, `api-key`, `AWS_SECRET_ACCESS_KEY`).
const SECRET_WORDS: [&str; 13] = [
    "password",
    "passwd",
    "passphrase",
    "pwd",
    "secret",
    "token",
    "credential",
    "apikey",
    "accesskey",
    "privatekey",
    "auth",
    "cookie",
    "session",
];

/// Whether command lines are redacted: unless `STALLSCOPE_REDACT=off`.
pub fn enabled() -> bool {
    std::env::var("STALLSCOPE_REDACT").map_or(true, |v| v != "off")
}

/// `args` with their secrets hidden, when [`enabled`].
pub fn command_line(args: Vec<String>) -> Vec<String> {
    if enabled() { redact(args) } else { args }
}

/// Whether an argument's name (`-Dname`, `--name`, `NAME`) names a secret.
fn secret_name(name: &str) -> bool {
    let bare = name.trim_start_matches('-');
    let bare = bare.strip_prefix('D').filter(|_| name.starts_with("-D")).unwrap_or(bare);
    let key: String = bare
        .chars()
        .filter(|c| !matches!(c, '-' | '_' | '.'))
        .flat_map(char::to_lowercase)
        .collect();
    SECRET_WORDS.iter().any(|w| key.contains(w))
}

/// `args` with their secrets hidden, whatever the environment says.
pub fn redact(args: Vec<String>) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut next_is_secret = false;
    for a in args {
        if next_is_secret {
            next_is_secret = false;
            if !a.starts_with('-') {
                out.push(HIDDEN.to_string());
                continue;
            }
        }
        // An option that takes its value as the next argument: `--token abc`, `-password x`.
        if a.starts_with('-') && !a.contains('=') && secret_name(&a) {
            next_is_secret = true;
            out.push(a);
            continue;
        }
        out.push(hide_in(&a));
    }
    out
}

/// One argument with its secrets hidden: a secret-named `name=value`'s value, a URL's password,
/// a bearer token.
fn hide_in(a: &str) -> String {
    if let Some((name, _)) = a.split_once('=')
        && !name.contains("://")
        && secret_name(name)
    {
        return format!("{name}={HIDDEN}");
    }
    let mut s = hide_url_passwords(a);
    if let Some(at) = s.find("Bearer ") {
        let from = at + "Bearer ".len();
        let end = s[from..].find(char::is_whitespace).map_or(s.len(), |e| from + e);
        if end > from {
            s.replace_range(from..end, HIDDEN);
        }
    }
    s
}

/// Every `scheme://user:password@` in `a` with its password hidden.
fn hide_url_passwords(a: &str) -> String {
    let mut out = String::with_capacity(a.len());
    let mut rest = a;
    while let Some(p) = rest.find("://") {
        let (head, tail) = rest.split_at(p + 3);
        out.push_str(head);
        // The authority ends at the first `/`, `?`, `#` or whitespace; its user info at the
        // last `@` in it.
        let end = tail.find(|c: char| matches!(c, '/' | '?' | '#') || c.is_whitespace());
        let authority = &tail[..end.unwrap_or(tail.len())];
        match authority.rfind('@').and_then(|at| Some((at, authority[..at].find(':')?))) {
            Some((at, colon)) if colon < at => {
                out.push_str(&authority[..=colon]);
                out.push_str(HIDDEN);
                out.push_str(&authority[at..]);
            }
            _ => out.push_str(authority),
        }
        rest = &tail[authority.len()..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn r(args: &[&str]) -> Vec<String> {
        redact(args.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn secret_named_values_are_hidden_in_every_form() {
        assert_eq!(
            r(&[
                "java",
                "-Dspring.datasource.password=hunter2",
                "-Djavax.net.ssl.keyStorePassword=hunter2",
                "-Xmx1g",
                "-jar",
                "app.jar",
                "--password=hunter2",
                "--token",
                "hunter2",
                "AWS_SECRET_ACCESS_KEY=hunter2",
                "--api-key",
                "hunter2",
            ]),
            [
                "java",
                "-Dspring.datasource.password=***",
                "-Djavax.net.ssl.keyStorePassword=***",
                "-Xmx1g",
                "-jar",
                "app.jar",
                "--password=***",
                "--token",
                "***",
                "AWS_SECRET_ACCESS_KEY=***",
                "--api-key",
                "***",
            ]
        );
    }

    #[test]
    fn what_is_not_secret_is_left_as_it_was() {
        let plain = [
            "java",
            "-XX:+UseG1GC",
            "-XX:MaxGCPauseMillis=50",
            "-Dfile.encoding=UTF-8",
            "-cp",
            "/opt/app/lib/*",
            "com.example.Main",
            "--port",
            "8080",
            "http://example.com/a?b=c",
        ];
        assert_eq!(r(&plain), plain);
        // A secret-named flag followed by another option takes no value.
        assert_eq!(r(&["--no-password", "--verbose"]), ["--no-password", "--verbose"]);
    }

    #[test]
    fn a_url_s_password_and_a_bearer_token_are_hidden() {
        assert_eq!(
            r(&[
                "--db=jdbc:postgresql://app:hunter2@db:5432/x",
                "https://u:hunter2@h/p",
                "-H",
                "Authorization: Bearer hunter2",
                "ftp://anonymous@h/",
            ]),
            [
                "--db=jdbc:postgresql://app:***@db:5432/x",
                "https://u:***@h/p",
                "-H",
                "Authorization: Bearer ***",
                "ftp://anonymous@h/",
            ]
        );
    }

    proptest! {
        /// Whatever surrounds it, a secret given in any of the forms never survives, and no
        /// argument is added or lost.
        #[test]
        fn a_secret_never_survives(
            before in proptest::collection::vec("[a-zA-Z0-9./:=-]{0,12}", 0..4),
            after in proptest::collection::vec("[a-zA-Z0-9./:=-]{0,12}", 0..4),
            name in "(db|app|spring\\.datasource|client|x)[._-]?(password|Token|SECRET|apiKey|credentials)",
            secret in "[A-Za-z0-9]{12}",
            form in 0..4usize,
        ) {
            let mut args: Vec<String> = before.clone();
            match form {
                0 => args.push(format!("-D{name}={secret}")),
                1 => args.push(format!("--{name}={secret}")),
                2 => { args.push(format!("--{name}")); args.push(secret.clone()); }
                _ => args.push(format!("jdbc:mysql://user:{secret}@host/db")),
            }
            args.extend(after.clone());
            let n = args.len();
            let out = redact(args);
            prop_assert_eq!(out.len(), n);
            prop_assert!(!out.iter().any(|a| a.contains(&secret)), "{:?}", out);
        }

        /// Arbitrary arguments never panic it and keep their number.
        #[test]
        fn any_arguments_keep_their_number(args in proptest::collection::vec(".{0,40}", 0..8)) {
            let n = args.len();
            prop_assert_eq!(redact(args).len(), n);
        }
    }
}
