"""Verification of pushed SAML assertions, with real signed documents (tests/saml_fixtures.py)."""

from __future__ import annotations

import base64
import functools
import resource
import shutil
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from lxml import etree

from tests.saml_fixtures import (
    BEARER,
    DS_NS,
    HOLDER_OF_KEY,
    NOW,
    SAML_NS,
    SAMLP_NS,
    SENDER_VOUCHES,
    IdpKey,
    add_subject_confirmation,
    build_assertion,
    build_response,
    encrypted_response,
    find,
    instant,
    make_idp_key,
    p,
    s,
    sign,
    signed_assertion,
    to_b64,
)
from umaserver.claims.model import SAML_TYPE, ClaimsError
from umaserver.claims.saml import (
    SamlIdp,
    SamlSettings,
    VerifiedAssertion,
    assertion_claims,
    verify_assertion,
)
from umaserver.storage.records import Claim

IDP = "https://idp.example"
OTHER_IDP = "https://other-idp.example"
AUDIENCE = "https://as.example"
SKEW = 120


@dataclass(frozen=True)
class Keys:
    idp: IdpKey
    idp_next: IdpKey  # the key IDP rolls over to
    other: IdpKey  # OTHER_IDP's key
    expired: IdpKey  # a certificate that expired before NOW
    not_yet_valid: IdpKey  # a certificate valid only from after NOW


@functools.cache
def keys() -> Keys:
    return Keys(
        idp=make_idp_key("idp"),
        idp_next=make_idp_key("idp next"),
        other=make_idp_key("other idp"),
        expired=make_idp_key("expired", not_before=NOW - 400 * 86400, not_after=NOW - 86400),
        not_yet_valid=make_idp_key(
            "not yet valid", not_before=NOW + 86400, not_after=NOW + 400 * 86400
        ),
    )


def idps(*, idp_certificates: tuple[str, ...] | None = None, **idp_options: Any) -> list[SamlIdp]:
    k = keys()
    return [
        SamlIdp(IDP, idp_certificates or (k.idp.certificate_pem,), **idp_options),
        SamlIdp(OTHER_IDP, (k.other.certificate_pem,)),
    ]


def settings(**options: Any) -> SamlSettings:
    return SamlSettings(audience=AUDIENCE, clock_skew=SKEW, **options)


def verify(value: Any, *, now: int = NOW, **options: Any) -> VerifiedAssertion:
    return verify_assertion(value, idps(), settings(**options), now)


def good_assertion(**kwargs: Any) -> etree._Element:
    return signed_assertion(keys().idp, **{"issuer": IDP, "audience": AUDIENCE, **kwargs})


# --- accepted documents ---------------------------------------------------------------------------


def test_valid_assertion_verifies() -> None:
    assertion = good_assertion()
    verified = verify(to_b64(assertion))
    assert verified.assertion_id == assertion.get("ID")
    assert verified.issuer == IDP
    assert verified.attributes == {
        "urn:oid:0.9.2342.19200300.100.1.3": "alice@example.org",
        "mail": "alice@example.org",  # FriendlyName alias
        "urn:oid:1.3.6.1.4.1.5923.1.1.1.1": ["member", "staff"],  # multi-valued: an array
        "eduPersonAffiliation": ["member", "staff"],
        "department": "research",
        "sub": "alice",  # from NameID
    }
    # Conditions NotOnOrAfter (NOW + 300) is the later bound; remembered until it plus the skew.
    assert verified.expires_at == NOW + 300 + SKEW


def test_assertion_claims_carry_the_idp_as_issuer() -> None:
    verified = verify(to_b64(good_assertion()))
    claims = assertion_claims(verified, "client-1", NOW + 5)
    by_name = {claim.name: claim for claim in claims}
    assert by_name["eduPersonAffiliation"] == Claim(
        type=SAML_TYPE,
        name="eduPersonAffiliation",
        value=["member", "staff"],
        issuer=IDP,
        client_id="client-1",
        gathered_at=NOW + 5,
        subject="alice",  # whom it is about: the NameID
    )
    assert by_name["sub"].value == "alice"
    assert {claim.subject for claim in claims} == {"alice"}
    assert {claim.type for claim in claims} == {"claim-client-assertion-saml-1.0"}
    assert {claim.issuer for claim in claims} == {IDP}
    assert len(claims) == len(verified.attributes)


def test_response_with_signed_assertion_verifies() -> None:
    response = build_response(good_assertion(), issuer=IDP)
    assert verify(to_b64(response)).attributes["mail"] == "alice@example.org"


@pytest.mark.parametrize("signing_key", ["idp", "idp_next"])
def test_response_and_assertion_both_signed_verify(signing_key: str) -> None:
    """Issue 9, item 11: "sign both" is accepted when both signatures verify with one key of the
    provider, each covering exactly its own element."""
    k = keys()
    key = getattr(k, signing_key)
    value = both_signed(assertion_key=key, response_key=key)
    rolled = idps(idp_certificates=(k.idp.certificate_pem, k.idp_next.certificate_pem))
    verified = verify_assertion(value, rolled, settings(), NOW)
    assert verified.issuer == IDP
    assert verified.attributes["mail"] == "alice@example.org"
    assert verified.subject == "alice"


def test_both_signed_with_two_different_keys_of_the_provider_is_refused() -> None:
    k = keys()
    value = both_signed(assertion_key=k.idp, response_key=k.idp_next)
    rolled = idps(idp_certificates=(k.idp.certificate_pem, k.idp_next.certificate_pem))
    with pytest.raises(ClaimsError, match="signature does not verify"):
        verify_assertion(value, rolled, settings(), NOW)


def test_both_signed_response_status_still_counts() -> None:
    assertion = good_assertion()
    response = build_response(
        assertion, issuer=IDP, status=f"{SAMLP_NS.replace('protocol', 'status')}:Requester"
    )
    with pytest.raises(ClaimsError, match="status is not Success"):
        verify(to_b64(sign(response, keys().idp)))


def test_signed_response_verifies() -> None:
    assertion = build_assertion(issuer=IDP, audience=AUDIENCE)
    response = sign(build_response(assertion, issuer=IDP), keys().idp)
    verified = verify(to_b64(response))
    assert verified.assertion_id == assertion.get("ID")
    assert verified.attributes["sub"] == "alice"


@pytest.mark.parametrize("signing_key", ["idp", "idp_next"])
def test_key_rollover_either_certificate_verifies(signing_key: str) -> None:
    k = keys()
    assertion = signed_assertion(getattr(k, signing_key), issuer=IDP, audience=AUDIENCE)
    rolled = idps(idp_certificates=(k.idp.certificate_pem, k.idp_next.certificate_pem))
    assert verify_assertion(to_b64(assertion), rolled, settings(), NOW).issuer == IDP


def test_line_wrapped_base64_is_accepted() -> None:
    wrapped = "\n  " + base64.encodebytes(etree.tostring(good_assertion())).decode() + "\r\n"
    assert "\n" in wrapped.strip()
    assert verify(wrapped).attributes["sub"] == "alice"


def test_one_of_several_audiences_is_enough() -> None:
    assertion = good_assertion(audience=["https://sp.example", AUDIENCE])
    assert verify(to_b64(assertion)).issuer == IDP


@pytest.mark.parametrize(
    "now",
    [NOW - 60 - SKEW, NOW + 300 + SKEW - 1],
    ids=["skew-before-not-before", "skew-after-not-on-or-after"],
)
def test_within_clock_skew_is_accepted(now: int) -> None:
    assertion = good_assertion(subject_not_on_or_after=None)
    assert verify(to_b64(assertion), now=now).issuer == IDP


def test_expires_at_is_the_later_bound() -> None:
    assertion = good_assertion(not_on_or_after=NOW + 100, subject_not_on_or_after=NOW + 200)
    assert verify(to_b64(assertion)).expires_at == NOW + 200 + SKEW
    only_subject = good_assertion(not_on_or_after=None, subject_not_on_or_after=NOW + 50)
    assert verify(to_b64(only_subject)).expires_at == NOW + 50 + SKEW


def test_only_listed_attributes_are_mapped() -> None:
    assertion = good_assertion()
    listed = idps(attributes=("mail", "department"), name_id_as_sub=False)
    verified = verify_assertion(to_b64(assertion), listed, settings(), NOW)
    assert verified.attributes == {
        "urn:oid:0.9.2342.19200300.100.1.3": "alice@example.org",
        "mail": "alice@example.org",
        "department": "research",
    }


def test_name_id_split_by_a_comment_is_read_whole() -> None:
    # The comment-truncation trick: "alice@evil.example<!---->.idp.example" signed (comments are
    # outside exclusive c14n) and read naively as "alice@evil.example".
    assertion = good_assertion(name_id="alice@evil.example.idp.example")
    xml = etree.tostring(assertion).replace(
        b">alice@evil.example.idp.example<", b">alice@evil.example<!---->.idp.example<"
    )
    assert b"<!---->" in xml
    verified = verify(base64.b64encode(xml).decode())
    assert verified.attributes["sub"] == "alice@evil.example.idp.example"


def test_sha1_is_accepted_when_allowed() -> None:
    assertion = sign(build_assertion(issuer=IDP, audience=AUDIENCE), keys().idp, sha1=True)
    assert verify(to_b64(assertion), allow_sha1=True).issuer == IDP


def test_without_subject_confirmation_the_conditions_decide() -> None:
    assertion = good_assertion(confirmation_method=None)
    assert verify(to_b64(assertion)).expires_at == NOW + 300 + SKEW


def test_only_bearer_confirmations_are_judged() -> None:
    # A holder-of-key confirmation that does not hold yet neither refuses the assertion nor, with
    # its later bound, makes it remembered longer.
    def holder_of_key(assertion: etree._Element) -> None:
        add_subject_confirmation(assertion, HOLDER_OF_KEY, NOW + 5000, NOW + 10_000)

    assert verify(assertion_with(holder_of_key)).expires_at == NOW + 300 + SKEW


def test_any_one_bearer_confirmation_is_enough() -> None:
    def second_bearer(assertion: etree._Element) -> None:
        find(assertion, "saml:Subject/saml:SubjectConfirmation/saml:SubjectConfirmationData").set(
            "NotOnOrAfter", instant(NOW - 1000)
        )
        add_subject_confirmation(assertion, BEARER, None, NOW + 500)

    # saml-core 2.4.1: "satisfying any one of them is sufficient"; the later bound is remembered.
    assert verify(assertion_with(second_bearer)).expires_at == NOW + 500 + SKEW


def with_recipient(*recipients: str | None) -> str:
    """An assertion with one bearer confirmation per recipient (None: no Recipient)."""
    assertion = build_assertion(issuer=IDP, audience=AUDIENCE, confirmation_method=None)
    for recipient in recipients:
        add_subject_confirmation(assertion, BEARER, None, NOW + 120)
        if recipient is not None:
            data = assertion.findall(".//saml:SubjectConfirmationData", {"saml": SAML_NS})[-1]
            data.set("Recipient", recipient)
    return to_b64(sign(assertion, keys().idp))


ACS = "https://app.example/saml/acs"


@pytest.mark.parametrize(
    ("recipients", "configured", "refusal"),
    [
        ((ACS,), (ACS,), None),
        (("https://evil.example/acs",), (ACS,), "Recipient 'https://evil.example/acs' is not one"),
        ((None,), (ACS,), "names no Recipient"),
        (("https://evil.example/acs", ACS), (ACS,), None),  # any one bearer confirmation
        (("https://evil.example/acs",), (), None),  # not configured: not checked
        ((ACS,), ("https://other.example/acs", ACS), None),
    ],
    ids=["listed", "another", "missing", "one-of-two", "not-configured", "one-of-several"],
)
def test_the_recipient_of_a_bearer_confirmation_is_checked_when_configured(
    recipients: tuple[str | None, ...], configured: tuple[str, ...], refusal: str | None
) -> None:
    """Issue 9, item 9: `[[saml_idps]] recipients`."""
    value = with_recipient(*recipients)
    providers = idps(recipients=configured)
    if refusal is None:
        assert verify_assertion(value, providers, settings(), NOW).issuer == IDP
    else:
        with pytest.raises(ClaimsError, match=refusal):
            verify_assertion(value, providers, settings(), NOW)


def test_a_bearer_confirmation_without_data_has_no_recipient() -> None:
    assertion = build_assertion(issuer=IDP, audience=AUDIENCE, confirmation_method=None)
    subject = find(assertion, "saml:Subject")
    etree.SubElement(subject, s("SubjectConfirmation"), Method=BEARER)
    value = to_b64(sign(assertion, keys().idp))
    with pytest.raises(ClaimsError, match="names no Recipient"):
        verify_assertion(value, idps(recipients=(ACS,)), settings(), NOW)


def test_one_time_use_is_reported() -> None:
    assert verify(to_b64(good_assertion())).one_time is False
    one_time = assertion_with(
        lambda a: find(a, "saml:Conditions").append(etree.Element(s("OneTimeUse")))
    )
    assert verify(one_time).one_time is True


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16"])
def test_doctype_as_text_is_not_a_doctype(encoding: str) -> None:
    # "<!DOCTYPE" in a CDATA section or a comment is text, not a declaration. (An attribute value
    # cannot hold it: "<" must be escaped there.)
    text = "<!DOCTYPE x [<!ENTITY a 'b'>]>"
    assertion = good_assertion(attributes=(("department", None, (text,)),))
    value = find(assertion, "saml:AttributeStatement/saml:Attribute/saml:AttributeValue")
    value.text = etree.CDATA(text)  # the same canonical form, so the signature still holds
    value.addnext(etree.Comment(" <!DOCTYPE y> "))
    xml = etree.tostring(assertion, encoding=encoding, xml_declaration=True)
    assert "<![CDATA[<!DOCTYPE" in xml.decode(encoding)

    assert verify(b64(xml)).attributes["department"] == text


# --- refusals -------------------------------------------------------------------------------------


def b64(xml: bytes) -> str:
    return base64.b64encode(xml).decode()


def tampered_attribute() -> str:
    assertion = good_assertion()
    find(
        assertion, "saml:AttributeStatement/saml:Attribute/saml:AttributeValue"
    ).text = "mallory@example.org"
    return to_b64(assertion)


def tampered_signature_value() -> str:
    assertion = good_assertion()
    value = find(assertion, "ds:Signature/ds:SignatureValue")
    raw = bytearray(base64.b64decode(value.text or ""))
    raw[10] ^= 1
    value.text = base64.b64encode(bytes(raw)).decode()
    return to_b64(assertion)


def evil_assertion(**kwargs: Any) -> etree._Element:
    return build_assertion(
        issuer=IDP, audience=AUDIENCE, name_id="mallory", **{"attributes": (), **kwargs}
    )


def wrapped_in_extensions() -> str:
    # XSW: an unsigned evil Assertion where the application looks, the signed original moved into
    # samlp:Extensions where a careless verifier still finds it by ID.
    response = build_response(evil_assertion(), issuer=IDP)
    extensions = etree.Element(p("Extensions"))
    find(response, "saml:Issuer").addnext(extensions)
    extensions.append(good_assertion())
    return to_b64(response)


def wrapped_in_advice() -> str:
    # XSW: an evil Assertion as the root, the signed original hidden inside its Advice.
    evil = evil_assertion()
    advice = etree.Element(s("Advice"))
    find(evil, "saml:Conditions").addnext(advice)
    advice.append(good_assertion())
    return to_b64(evil)


def second_assertion_in_response() -> str:
    return to_b64(build_response(good_assertion(), evil_assertion(), issuer=IDP))


def signature_moved_into_subject() -> str:
    assertion = good_assertion()
    signature = find(assertion, "ds:Signature")
    find(assertion, "saml:Subject").append(signature)
    return to_b64(assertion)


def reference_to_another_element() -> str:
    # The signature sits in the (unsigned, rewritable) Assertion but covers the Response.
    assertion = evil_assertion(attributes=(("role", None, ("admin",)),))
    response = build_response(assertion, issuer=IDP)
    signed = sign(response, keys().idp, placeholder_in=assertion, signed_id=response.get("ID"))
    return to_b64(signed)


def duplicate_id() -> str:
    assertion = good_assertion()
    response = build_response(assertion, issuer=IDP)
    extensions = etree.Element(p("Extensions"))
    find(response, "saml:Issuer").addnext(extensions)
    etree.SubElement(extensions, "{urn:example}Thing", ID=assertion.get("ID") or "")
    return to_b64(response)


def two_references() -> str:
    assertion = build_assertion(issuer=IDP, audience=AUDIENCE)
    find(assertion, "saml:AttributeStatement").set("ID", "_statement")
    return to_b64(sign(assertion, keys().idp, extra_reference_ids=["_statement"]))


def signed_twice() -> str:
    # A signed Assertion inside a signed Response: the "sign both" of Azure AD, ADFS and Okta.
    response = build_response(good_assertion(), issuer=IDP)
    return to_b64(sign(response, keys().idp))


def both_signed(
    assertion_key: IdpKey | None = None, response_key: IdpKey | None = None, **kwargs: Any
) -> str:
    assertion = signed_assertion(
        assertion_key or keys().idp, **{"issuer": IDP, "audience": AUDIENCE, **kwargs}
    )
    return to_b64(sign(build_response(assertion, issuer=IDP), response_key or keys().idp))


def assertion_signed_twice() -> str:
    # Two signatures on the Assertion, none on the Response: not "sign both".
    assertion = good_assertion()
    second = sign(build_assertion(issuer=IDP, audience=AUDIENCE), keys().idp)
    find(assertion, "saml:Subject").addprevious(find(second, "ds:Signature"))
    return to_b64(assertion)


def three_signatures() -> str:
    response = etree.fromstring(base64.b64decode(signed_twice()))
    extra = find(signed_assertion(keys().idp, issuer=IDP, audience=AUDIENCE), "ds:Signature")
    find(response, "samlp:Status").addprevious(extra)
    return to_b64(response)


def both_signed_assertion_tampered() -> str:
    # The Response's signature verifies (it was made last, over the altered Assertion); the
    # Assertion's own does not.
    assertion = good_assertion()
    values = assertion.findall(".//saml:AttributeValue", {"saml": SAML_NS})
    values[0].text = "mallory@example.org"
    return to_b64(sign(build_response(assertion, issuer=IDP), keys().idp))


def both_signed_response_reference_elsewhere() -> str:
    # The Response's signature names the Assertion: it covers another element than its own.
    assertion = good_assertion()
    response = build_response(assertion, issuer=IDP)
    return to_b64(sign(response, keys().idp, signed_id=assertion.get("ID")))


def xpath_transform() -> str:
    assertion = good_assertion()
    transforms = find(assertion, "ds:Signature/ds:SignedInfo/ds:Reference/ds:Transforms")
    etree.SubElement(
        transforms,
        f"{{{DS_NS}}}Transform",
        Algorithm="http://www.w3.org/TR/1999/REC-xpath-19991116",
    )
    return to_b64(assertion)


def empty_signature_part(path: str) -> Callable[[], str]:
    def make() -> str:
        assertion = good_assertion()
        find(assertion, f"ds:Signature/{path}").text = None
        return to_b64(assertion)

    return make


def empty_key_value() -> str:
    # KeyInfo is not signed, so the signature still holds; signxml compares the key value with the
    # certificate and base64-decodes the missing Modulus: a TypeError, not a SignXMLException.
    assertion = good_assertion()
    key_value = etree.SubElement(find(assertion, "ds:Signature/ds:KeyInfo"), f"{{{DS_NS}}}KeyValue")
    rsa_key_value = etree.SubElement(key_value, f"{{{DS_NS}}}RSAKeyValue")
    etree.SubElement(rsa_key_value, f"{{{DS_NS}}}Modulus")
    etree.SubElement(rsa_key_value, f"{{{DS_NS}}}Exponent")
    return to_b64(assertion)


def with_doctype(declarations: str) -> str:
    xml = etree.tostring(good_assertion())
    return b64(
        f'<?xml version="1.0"?>\n<!DOCTYPE saml:Assertion [{declarations}]>\n'.encode() + xml
    )


BILLION_LAUGHS = '<!ENTITY lol "lol">' + "".join(
    f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10 if i > 1 else "&lol;" * 10}">' for i in range(1, 10)
)


def entity_in_issuer() -> str:
    xml = etree.tostring(good_assertion()).replace(b">https://idp.example<", b">&lol9;<", 1)
    return b64(b"<!DOCTYPE saml:Assertion [" + BILLION_LAUGHS.encode() + b"]>" + xml)


def encoded_doctype(encoding: str) -> str:
    xml = f'<?xml version="1.0" encoding="{encoding}"?><!DOCTYPE x [<!ENTITY a "b">]><x>&a;</x>'
    return b64(xml.encode(encoding))


def unsigned_assertion() -> str:
    return to_b64(build_assertion(issuer=IDP, audience=AUDIENCE))


def response_with(**kwargs: Any) -> str:
    return to_b64(build_response(good_assertion(), **{"issuer": IDP, **kwargs}))


def assertion_with(edit: Callable[[etree._Element], None]) -> str:
    """An assertion edited before it is signed (the IdP really said this)."""
    assertion = build_assertion(issuer=IDP, audience=AUDIENCE)
    edit(assertion)
    return to_b64(sign(assertion, keys().idp))


def only_confirmation(method: str) -> Callable[[], str]:
    return lambda: to_b64(good_assertion(confirmation_method=method))


def unbounded_second_bearer(assertion: etree._Element) -> None:
    # The first bearer window ends, the second has none: without a Conditions NotOnOrAfter the
    # assertion would be accepted forever.
    find(assertion, "saml:Conditions").attrib.pop("NotOnOrAfter")
    add_subject_confirmation(assertion, BEARER, None, None)


def bounded_holder_of_key(assertion: etree._Element) -> None:
    # Only the holder-of-key confirmation, which is not judged, has a bound.
    find(assertion, "saml:Conditions").attrib.pop("NotOnOrAfter")
    find(
        assertion, "saml:Subject/saml:SubjectConfirmation/saml:SubjectConfirmationData"
    ).attrib.pop("NotOnOrAfter")
    add_subject_confirmation(assertion, HOLDER_OF_KEY, None, NOW + 100)


def unknown_condition(assertion: etree._Element) -> None:
    etree.SubElement(find(assertion, "saml:Conditions"), "{urn:example}MustBeTuesday")


def bad_instant(assertion: etree._Element) -> None:
    find(assertion, "saml:Conditions").set("NotOnOrAfter", "tomorrow")


def no_conditions(assertion: etree._Element) -> None:
    conditions = find(assertion, "saml:Conditions")
    assertion.remove(conditions)


def second_restriction_without_us(assertion: etree._Element) -> None:
    restriction = etree.SubElement(find(assertion, "saml:Conditions"), s("AudienceRestriction"))
    etree.SubElement(restriction, s("Audience")).text = "https://sp.example"


REFUSALS: list[tuple[str, Callable[[], Any], dict[str, Any], str]] = [
    ("not-a-string", lambda: {"xml": "<x/>"}, {}, "must be a string"),
    ("bytes", lambda: b"PHgvPg==", {}, "must be a string"),
    ("invalid-base64", lambda: "PHNhbWw6QXNzZXJ0aW9u!!", {}, "not valid base64"),
    ("non-ascii-base64", lambda: "PHgvPg==é", {}, "not valid base64"),
    ("bad-padding", lambda: "PHgvPg=", {}, "not valid base64"),
    ("oversized", lambda: to_b64(good_assertion()), {"max_bytes": 2000}, "larger than 2000 bytes"),
    ("huge-string", lambda: "A" * 10_000_000, {}, "larger than 262144 bytes"),
    ("invalid-xml", lambda: b64(b"<saml:Assertion xmlns:saml='x'>"), {}, "not well-formed XML"),
    ("empty", lambda: "", {}, "not well-formed XML"),
    ("doctype", lambda: with_doctype(""), {}, "has a DOCTYPE"),
    ("entity-declaration", lambda: with_doctype(BILLION_LAUGHS), {}, "has a DOCTYPE"),
    ("billion-laughs", entity_in_issuer, {}, "DOCTYPE and entity declarations are not allowed"),
    ("doctype-utf-16", lambda: encoded_doctype("utf-16"), {}, "has a DOCTYPE"),
    ("doctype-utf-32", lambda: encoded_doctype("utf-32"), {}, "has a DOCTYPE"),
    (
        "external-dtd",
        lambda: b64(b'<!DOCTYPE x SYSTEM "http://127.0.0.1/x.dtd"><x/>'),
        {},
        "DOCTYPE",
    ),
    ("not-saml", lambda: b64(b"<html/>"), {}, "neither a saml:Assertion nor a samlp:Response"),
    (
        "encrypted",
        lambda: to_b64(encrypted_response(IDP)),
        {},
        "encrypted SAML assertions are not supported",
    ),
    ("unsigned", unsigned_assertion, {}, "the document is not signed"),
    (
        "bad-signature",
        tampered_attribute,
        {},
        "SAML assertion refused: signature does not verify against the certificates of "
        "https://idp.example",
    ),
    ("bad-signature-value", tampered_signature_value, {}, "signature does not verify"),
    (
        "empty-signature-value",
        empty_signature_part("ds:SignatureValue"),
        {},
        "SignatureValue is missing or empty",
    ),
    (
        "empty-digest-value",
        empty_signature_part("ds:SignedInfo/ds:Reference/ds:DigestValue"),
        {},
        "DigestValue is missing or empty",
    ),
    ("empty-key-value", empty_key_value, {}, "signature does not verify"),
    (
        "unknown-idp",
        lambda: to_b64(
            signed_assertion(keys().idp, issuer="https://unknown.example", audience=AUDIENCE)
        ),
        {},
        "unknown identity provider 'https://unknown.example'",
    ),
    (
        "key-of-another-idp",
        lambda: to_b64(signed_assertion(keys().other, issuer=IDP, audience=AUDIENCE)),
        {},
        "signature does not verify against the certificates of https://idp.example",
    ),
    (
        "wrong-audience",
        lambda: to_b64(good_assertion(audience="https://sp.example")),
        {},
        "not addressed to this server",
    ),
    (
        "audience-prefix",
        lambda: to_b64(good_assertion(audience=AUDIENCE + "/")),
        {},
        "not addressed to this server",
    ),
    (
        "second-restriction",
        lambda: assertion_with(second_restriction_without_us),
        {},
        "not addressed to this server",
    ),
    (
        "no-audience-restriction",
        lambda: to_b64(good_assertion(audience=None)),
        {},
        "no AudienceRestriction",
    ),
    ("no-conditions", lambda: assertion_with(no_conditions), {}, "no Conditions"),
    ("unknown-condition", lambda: assertion_with(unknown_condition), {}, "does not understand"),
    ("bad-instant", lambda: assertion_with(bad_instant), {}, "NotOnOrAfter is not an xs:dateTime"),
    (
        "expired",
        lambda: to_b64(good_assertion(not_on_or_after=NOW - SKEW, subject_not_on_or_after=None)),
        {},
        "expired (Conditions NotOnOrAfter)",
    ),
    (
        "subject-expired",
        lambda: to_b64(good_assertion(subject_not_on_or_after=NOW - SKEW - 1)),
        {},
        "expired (bearer SubjectConfirmationData NotOnOrAfter)",
    ),
    (
        "not-yet-valid",
        lambda: to_b64(good_assertion(not_before=NOW + SKEW + 1)),
        {},
        "not yet valid (Conditions NotBefore)",
    ),
    (
        "subject-not-yet-valid",
        lambda: to_b64(good_assertion(subject_not_before=NOW + SKEW + 1)),
        {},
        "not yet valid (bearer SubjectConfirmationData NotBefore)",
    ),
    (
        "never-expires",
        lambda: to_b64(good_assertion(not_on_or_after=None, subject_not_on_or_after=None)),
        {},
        "no NotOnOrAfter",
    ),
    (
        "never-expires-second-bearer",
        lambda: assertion_with(unbounded_second_bearer),
        {},
        "no NotOnOrAfter",
    ),
    (
        "never-expires-bound-not-bearer",
        lambda: assertion_with(bounded_holder_of_key),
        {},
        "no NotOnOrAfter",
    ),
    (
        "holder-of-key",
        only_confirmation(HOLDER_OF_KEY),
        {},
        "no bearer SubjectConfirmation",
    ),
    (
        "sender-vouches",
        only_confirmation(SENDER_VOUCHES),
        {},
        "no bearer SubjectConfirmation",
    ),
    ("wrapping-extensions", wrapped_in_extensions, {}, "exactly one Assertion, it holds 2"),
    ("wrapping-advice", wrapped_in_advice, {}, "exactly one Assertion, it holds 2"),
    ("second-assertion", second_assertion_in_response, {}, "exactly one Assertion, it holds 2"),
    (
        "signature-not-child",
        signature_moved_into_subject,
        {},
        "not a direct child of the Assertion or the Response",
    ),
    (
        "reference-elsewhere",
        reference_to_another_element,
        {},
        "Reference does not point to the element",
    ),
    ("duplicate-id", duplicate_id, {}, "appears more than once"),
    ("two-references", two_references, {}, "exactly one Reference, it has 2"),
    (
        "two-signatures-on-the-assertion",
        assertion_signed_twice,
        {},
        "exactly one Signature, it holds 2",
    ),
    (
        "three-signatures",
        three_signatures,
        {},
        "exactly one Signature, it holds 3",
    ),
    (
        "both-signed-assertion-by-another-key",
        lambda: both_signed(assertion_key=keys().other),
        {},
        "signature does not verify against the certificates of https://idp.example",
    ),
    (
        "both-signed-response-by-another-key",
        lambda: both_signed(response_key=keys().other),
        {},
        "signature does not verify against the certificates of https://idp.example",
    ),
    (
        "both-signed-assertion-tampered",
        both_signed_assertion_tampered,
        {},
        "signature does not verify",
    ),
    (
        "both-signed-response-covers-the-assertion",
        both_signed_response_reference_elsewhere,
        {},
        "Reference does not point to the element",
    ),
    ("xpath-transform", xpath_transform, {}, "transform SAML does not allow"),
    (
        "sha1-not-allowed",
        lambda: to_b64(sign(build_assertion(issuer=IDP, audience=AUDIENCE), keys().idp, sha1=True)),
        {},
        "uses SHA-1, which is not allowed",
    ),
    (
        "response-status",
        lambda: response_with(status=f"{SAMLP_NS.replace('protocol', 'status')}:Requester"),
        {},
        "status is not Success",
    ),
    ("response-issuer", lambda: response_with(issuer=OTHER_IDP), {}, "Response's Issuer"),
]


@pytest.mark.parametrize(
    ("make_value", "options", "expected"),
    [pytest.param(make, options, expected, id=name) for name, make, options, expected in REFUSALS],
)
def test_refusals(make_value: Callable[[], Any], options: dict[str, Any], expected: str) -> None:
    value = make_value()
    with pytest.raises(ClaimsError) as refused:
        verify(value, **options)
    assert refused.value.description.startswith("SAML assertion refused: ")
    assert expected in refused.value.description


@pytest.mark.parametrize("key_name", ["expired", "not_yet_valid"])
def test_certificate_outside_its_validity_is_named(key_name: str) -> None:
    key = getattr(keys(), key_name)
    assertion = to_b64(signed_assertion(key, issuer=IDP, audience=AUDIENCE))
    # Pinned alongside a valid certificate, as during a key rollover.
    pinned = idps(idp_certificates=(keys().idp.certificate_pem, key.certificate_pem))
    with pytest.raises(ClaimsError) as refused:
        verify_assertion(assertion, pinned, settings(), NOW)
    assert refused.value.description == (
        "SAML assertion refused: the signing certificate of https://idp.example is not valid at "
        "2025-06-15T15:06:40Z (expired or not yet valid)"
    )


def test_wrong_key_is_not_blamed_on_an_expired_certificate() -> None:
    assertion = to_b64(signed_assertion(keys().other, issuer=IDP, audience=AUDIENCE))
    pinned = idps(idp_certificates=(keys().expired.certificate_pem, keys().idp.certificate_pem))
    with pytest.raises(ClaimsError, match="signature does not verify against the certificates"):
        verify_assertion(assertion, pinned, settings(), NOW)


def long_issuer() -> str:
    return to_b64(good_assertion(issuer="https://" + "a" * 100_000))


def long_duplicate_id() -> str:
    assertion = good_assertion(assertion_id="_" + "b" * 50_000)  # in three places
    response = build_response(assertion, issuer=IDP)
    find(response, "saml:Issuer").addnext(etree.Element(p("Extensions"), ID=assertion.get("ID")))
    return to_b64(response)


@pytest.mark.parametrize(
    ("make_value", "quoted"),
    [(long_issuer, "unknown identity provider 'https://aaa"), (long_duplicate_id, "the ID '_bbb")],
    ids=["issuer", "duplicate-id"],
)
def test_untrusted_strings_are_cut_short(make_value: Callable[[], str], quoted: str) -> None:
    with pytest.raises(ClaimsError) as refused:
        verify(make_value())
    description = refused.value.description
    assert quoted in description
    assert "'..." in description
    assert len(description) < 350


def entity_in_attribute() -> str:
    xml = etree.tostring(good_assertion()).replace(b'Version="2.0"', b'Version="&lol9;"', 1)
    return b64(b"<!DOCTYPE saml:Assertion [" + BILLION_LAUGHS.encode() + b"]>" + xml)


def quadratic_blowup() -> str:
    xml = etree.tostring(good_assertion()).replace(b">alice<", b">" + b"&a;" * 5000 + b"<", 1)
    return b64(b'<!DOCTYPE saml:Assertion [<!ENTITY a "' + b"x" * 40_000 + b'">]>' + xml)


@pytest.mark.parametrize(
    "make_value",
    [entity_in_issuer, entity_in_attribute, quadratic_blowup],
    ids=["billion-laughs-text", "billion-laughs-attribute", "quadratic-blowup"],
)
def test_entity_bombs_are_refused_unexpanded(make_value: Callable[[], str]) -> None:
    # Expanded, these are gigabytes (a billion "lol"s; 5000 copies of 40 KB). With the module's
    # parser settings libxml2 substitutes no entity and stops at its amplification limit: the
    # refusal takes milliseconds and no memory to speak of.
    value = make_value()
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    started = time.perf_counter()
    with pytest.raises(ClaimsError, match="DOCTYPE and entity declarations are not allowed"):
        verify(value)
    assert time.perf_counter() - started < 0.5
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before < 100 * 1024


def test_huge_string_is_refused_without_decoding() -> None:
    started = time.perf_counter()
    with pytest.raises(ClaimsError):
        verify("A" * 50_000_000)
    assert time.perf_counter() - started < 0.5


def test_configuration_is_checked() -> None:
    with pytest.raises(ValueError, match="certificate 0 is not a PEM"):
        SamlIdp(IDP, ("not a certificate",))
    with pytest.raises(ValueError, match="no certificates"):
        SamlIdp(IDP, ())
    with pytest.raises(ValueError, match="audience"):
        SamlSettings(audience="")


# --- an independent implementation: pysaml2 as the IdP --------------------------------------------

PYSAML2_IDP = "https://idp.example/pysaml2"


@pytest.fixture
def xmlsec1() -> str:
    """pysaml2 signs with the xmlsec1 binary. Without it the interoperability tests fail: a skipped
    test is too easily never noticed."""
    path = shutil.which("xmlsec1")
    if path is None:
        pytest.fail("install xmlsec1: apt-get install xmlsec1; `make test` does this")
    return path


def pysaml2_response(
    tmp_path: Path, xmlsec1: str, key: IdpKey, *, sha256: bool, **signing: bool
) -> str:
    """A SAML Response made by pysaml2's IdP (signed by xmlsec1), as line-wrapped base64.

    Without `sha256`, pysaml2 signs with its default, RSA-SHA1.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pysaml2's own deprecation warnings on import
        from saml2 import BINDING_HTTP_POST, BINDING_HTTP_REDIRECT
        from saml2.config import IdPConfig
        from saml2.saml import NAME_FORMAT_URI, NAMEID_FORMAT_PERSISTENT, NameID
        from saml2.server import Server
        from saml2.xmldsig import DIGEST_SHA256, SIG_RSA_SHA256

    (tmp_path / "idp.key").write_text(key.private_key_pem)
    (tmp_path / "idp.crt").write_text(key.certificate_pem)
    sp_metadata = f"""<md:EntityDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata"
        entityID="{AUDIENCE}">
      <md:SPSSODescriptor protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol">
        <md:AssertionConsumerService Binding="{BINDING_HTTP_POST}" Location="{AUDIENCE}/acs"
            index="0"/>
      </md:SPSSODescriptor>
    </md:EntityDescriptor>"""
    config = IdPConfig().load(
        {
            "entityid": PYSAML2_IDP,
            "key_file": str(tmp_path / "idp.key"),
            "cert_file": str(tmp_path / "idp.crt"),
            "xmlsec_binary": xmlsec1,
            "metadata": {"inline": [sp_metadata]},
            "service": {
                "idp": {
                    "endpoints": {
                        "single_sign_on_service": [(f"{PYSAML2_IDP}/sso", BINDING_HTTP_REDIRECT)]
                    },
                    "policy": {
                        "default": {
                            "lifetime": {"minutes": 15},
                            "attribute_restrictions": None,
                            "name_form": NAME_FORMAT_URI,
                        }
                    },
                    "name_id_format": [NAMEID_FORMAT_PERSISTENT],
                }
            },
        }
    )
    response = Server(config=config).create_authn_response(
        {"mail": ["alice@example.org"], "eduPersonAffiliation": ["member", "staff"]},
        in_response_to="_request-1",
        destination=f"{AUDIENCE}/acs",
        sp_entity_id=AUDIENCE,
        name_id=NameID(format=NAMEID_FORMAT_PERSISTENT, text="alice-pysaml2"),
        authn={"class_ref": "urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport"},
        **({"sign_alg": SIG_RSA_SHA256, "digest_alg": DIGEST_SHA256} if sha256 else {}),
        **signing,
    )
    return base64.encodebytes(str(response).encode()).decode()


@pytest.mark.parametrize(
    "signing",
    [
        {"sign_assertion": True, "sign_response": False},
        {"sign_assertion": False, "sign_response": True},
        {"sign_assertion": True, "sign_response": True},  # "sign both" (issue 9, item 11)
    ],
    ids=["assertion-signed", "response-signed", "both-signed"],
)
def test_assertion_from_pysaml2_idp_verifies(
    tmp_path: Path, xmlsec1: str, signing: dict[str, bool]
) -> None:
    now = int(time.time())  # pysaml2 stamps the real time
    key = make_idp_key("pysaml2 idp", not_before=now - 3600, not_after=now + 86400)
    document = pysaml2_response(tmp_path, xmlsec1, key, sha256=True, **signing)
    trusted = [SamlIdp(PYSAML2_IDP, (key.certificate_pem,))]

    verified = verify_assertion(document, trusted, settings(), now)

    assert verified.issuer == PYSAML2_IDP
    assert verified.attributes == {
        "urn:oid:0.9.2342.19200300.100.1.3": "alice@example.org",
        "mail": "alice@example.org",
        "urn:oid:1.3.6.1.4.1.5923.1.1.1.1": ["member", "staff"],
        "eduPersonAffiliation": ["member", "staff"],
        "sub": "alice-pysaml2",
    }
    # pysaml2 stamps its own clock, some time after `now` on a busy machine.
    signed_by = int(time.time())
    assert now < verified.expires_at <= signed_by + 15 * 60 + SKEW + 1
    # The server trusting a different audience refuses the same document.
    with pytest.raises(ClaimsError, match="not addressed to this server"):
        verify_assertion(document, trusted, SamlSettings(audience="https://elsewhere.example"), now)


def test_pysaml2_default_sha1_signature_needs_allow_sha1(tmp_path: Path, xmlsec1: str) -> None:
    now = int(time.time())
    key = make_idp_key("pysaml2 idp", not_before=now - 3600, not_after=now + 86400)
    document = pysaml2_response(
        tmp_path, xmlsec1, key, sha256=False, sign_assertion=True, sign_response=False
    )
    trusted = [SamlIdp(PYSAML2_IDP, (key.certificate_pem,))]
    with pytest.raises(ClaimsError, match="SHA-1"):
        verify_assertion(document, trusted, settings(), now)
    assert verify_assertion(document, trusted, settings(allow_sha1=True), now).issuer == PYSAML2_IDP


def test_the_recipient_pysaml2_names_is_checked_when_configured(
    tmp_path: Path, xmlsec1: str
) -> None:
    now = int(time.time())
    key = make_idp_key("pysaml2 idp", not_before=now - 3600, not_after=now + 86400)
    document = pysaml2_response(
        tmp_path, xmlsec1, key, sha256=True, sign_assertion=True, sign_response=True
    )
    acs = [SamlIdp(PYSAML2_IDP, (key.certificate_pem,), recipients=(f"{AUDIENCE}/acs",))]
    assert verify_assertion(document, acs, settings(), now).issuer == PYSAML2_IDP
    elsewhere = [SamlIdp(PYSAML2_IDP, (key.certificate_pem,), recipients=("https://x.example",))]
    with pytest.raises(ClaimsError, match=r"Recipient .* is not one of this server's recipients"):
        verify_assertion(document, elsewhere, settings(), now)
