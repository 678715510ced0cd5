//! Names that cross a seam as text but must not be confused with one another: a job's
//! idempotency key, the job id its provider gave it, the provider instance that runs it, the
//! engine that holds a lease.
//! Each is stored and sent as a plain string (`serde(transparent)`).

/// A string newtype with the conversions every one of them needs.
macro_rules! string_name {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            pub fn as_str(&self) -> &str {
                &self.0
            }

            pub fn is_empty(&self) -> bool {
                self.0.is_empty()
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                $name(s)
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                $name(s.to_string())
            }
        }

        impl From<$name> for String {
            fn from(n: $name) -> String {
                n.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                &self.0 == other
            }
        }
    };
}

string_name!(
    /// Unique per launch attempt (`{operation}-{seq}`); handed to the job so a launch whose
    /// answer was lost can be found again.
    IdempotencyKey
);

string_name!(
    /// The id a provider gave a job it started (AWX's job id, the local runner's directory).
    JobId
);

string_name!(
    /// A configured provider instance (`providers[].name`): which one runs a type's jobs.
    ProviderName
);

string_name!(
    /// The engine (one per replica) that holds a resource's lease: the name it claims under,
    /// which fences its writes.
    LeaseOwner
);
