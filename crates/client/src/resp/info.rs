//! `INFO`'s text, parsed: `# Section` headers and `field:value` lines.

/// One `# Name` section of an `INFO` reply, its fields in the server's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InfoSection {
    /// As the server wrote it: `Server`, `Clients`, `Keyspace`, …
    pub name: String,
    pub fields: Vec<(String, String)>,
}

/// A parsed `INFO` reply.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Info {
    pub sections: Vec<InfoSection>,
}

impl Info {
    /// Parses `INFO`'s text. A field before any header goes in a section named `""`; a line
    /// without `:` is skipped (Redis writes none).
    pub fn parse(text: &str) -> Info {
        let mut sections: Vec<InfoSection> = Vec::new();
        for line in text.lines().map(str::trim_end) {
            if let Some(name) = line.strip_prefix('#') {
                sections.push(InfoSection {
                    name: name.trim().to_string(),
                    fields: Vec::new(),
                });
            } else if let Some((k, v)) = line.split_once(':') {
                if sections.is_empty() {
                    sections.push(InfoSection {
                        name: String::new(),
                        fields: Vec::new(),
                    });
                }
                let last = sections.last_mut().expect("a section");
                last.fields.push((k.to_string(), v.to_string()));
            }
        }
        Info { sections }
    }

    /// The section named `name` (case-insensitive: `INFO` takes `server` for `# Server`).
    pub fn section(&self, name: &str) -> Option<&InfoSection> {
        self.sections
            .iter()
            .find(|s| s.name.eq_ignore_ascii_case(name))
    }

    /// The value of `field`, in whichever section holds it.
    pub fn get(&self, field: &str) -> Option<&str> {
        self.sections
            .iter()
            .flat_map(|s| &s.fields)
            .find(|(k, _)| k == field)
            .map(|(_, v)| v.as_str())
    }

    /// A field's value as an integer.
    pub fn int(&self, field: &str) -> Option<i64> {
        self.get(field)?.parse().ok()
    }
}

/// The `a=1,b=2` form of some fields' values (`db0:keys=1,expires=0`,
/// `cmdstat_get:calls=2,usec=7`) as pairs.
pub fn subfields(value: &str) -> Vec<(&str, &str)> {
    value
        .split(',')
        .filter_map(|kv| kv.split_once('='))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_fields_and_subfields() {
        let text = "# Server\r\nredis_version:7.0.15\r\nexecutable:/usr/bin/redis-server\r\n\r\n\
                    # Keyspace\r\ndb0:keys=2,expires=1,avg_ttl=0\r\n";
        let info = Info::parse(text);
        assert_eq!(info.sections.len(), 2);
        assert_eq!(info.get("redis_version"), Some("7.0.15"));
        assert_eq!(info.get("executable"), Some("/usr/bin/redis-server"));
        let ks = info.section("keyspace").unwrap();
        assert_eq!(ks.name, "Keyspace");
        assert_eq!(
            subfields(&ks.fields[0].1),
            vec![("keys", "2"), ("expires", "1"), ("avg_ttl", "0")]
        );
        assert_eq!(info.int("redis_version"), None);
        assert_eq!(Info::parse("a:1\n").int("a"), Some(1));
    }
}
