"""What an app's blueprints share, typed: the config, the clock, the owners' rules (the file's, and
`rules_for` an owner with their own), the claim verifiers and the key that makes RPTs from their
seeds. `create_app` installs it; `runtime()` reads
it inside a request (instead of string keys into `app.config` and `app.extensions`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from flask import Flask, current_app

from .clock import Clock
from .config import Config
from .policy.rules import RuleSet
from .policy.store import PolicyStore
from .services.claim_verifiers import ConfiguredVerifiers
from .services.owner_rules import effective_rules
from .services.signing_keys import JwtRpts
from .storage import Storage

_KEY = "umaserver.runtime"


@dataclass(frozen=True)
class Runtime:
    config: Config
    clock: Clock
    policies: PolicyStore
    verifiers: ConfiguredVerifiers
    # The keys derived from each of `secret_keys`, in their order: the first makes, all verify.
    rpt_keys: tuple[bytes, ...] = field(repr=False)
    csrf_keys: tuple[bytes, ...] = field(repr=False)
    # How RPTs are signed with `[tokens] rpt_format = "jwt"`; None: opaque RPTs.
    jwt_rpts: JwtRpts | None = None

    @property
    def rpt_key(self) -> bytes:
        """The key that makes RPTs from their seeds now."""
        return self.rpt_keys[0]

    def rules_for(self, storage: Storage, owner: str) -> RuleSet:
        """The rules a decision about `owner`'s sets (a username, as rules name owners) uses now:
        the rule file's in force and, unless `[policies] owner_rules = false`, the owner's own
        (a `services.decision.RulesFor`)."""
        return effective_rules(storage, self.policies.rules, owner, enabled=self.config.owner_rules)


def install(app: Flask, runtime: Runtime) -> None:
    app.extensions[_KEY] = runtime


def runtime() -> Runtime:
    found: Runtime = current_app.extensions[_KEY]
    return found
