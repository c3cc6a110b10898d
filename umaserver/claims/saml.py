"""Verification of pushed SAML 2.0 assertions (claim type `claim-client-assertion-saml-1.0`).

A client pushes `{"saml_assertion": "<base64>"}`: a signed `saml:Assertion`, or a `samlp:Response`
holding exactly one Assertion, signed on the Assertion, on the Response, or on both ("sign both").
The assertion is verified against the identity providers of the configuration and its attributes
become claims issued by that provider, about the subject its NameID names. Plain Python: no Flask, no database. Replay detection (remembering assertion IDs until
`expires_at`, and refusing a `one_time` assertion a second time) is the caller's job.

The order of the checks matters. The document is parsed with a hardened parser before anything
else looks at it; its shape is checked strictly enough that signature wrapping has nowhere to hide
(one Assertion; one Signature, or one on the Response and one on its Assertion; each a direct
child of the element it signs, with one Reference naming that element's unique ID); the unverified
Issuer only chooses which certificates to try; and everything after the signature is read from the XML that signxml returns as signed, never from the document.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from cryptography import x509
from lxml import etree
from signxml.algorithms import CanonicalizationMethod, DigestAlgorithm, SignatureMethod
from signxml.exceptions import InvalidCertificate, SignXMLException
from signxml.verifier import SignatureConfiguration, VerifyResult, XMLVerifier

from ..storage.records import Claim
from .model import SAML_TYPE, ClaimsError

SAML_NS = "urn:oasis:names:tc:SAML:2.0:assertion"
SAMLP_NS = "urn:oasis:names:tc:SAML:2.0:protocol"
DS_NS = "http://www.w3.org/2000/09/xmldsig#"
XSI_NS = "http://www.w3.org/2001/XMLSchema-instance"

ASSERTION = f"{{{SAML_NS}}}Assertion"
ENCRYPTED_ASSERTION = f"{{{SAML_NS}}}EncryptedAssertion"
RESPONSE = f"{{{SAMLP_NS}}}Response"
SIGNATURE = f"{{{DS_NS}}}Signature"

_NS = {"saml": SAML_NS, "samlp": SAMLP_NS, "ds": DS_NS}

ENTITY_NAMEID_FORMAT = "urn:oasis:names:tc:SAML:2.0:nameid-format:entity"
BEARER = "urn:oasis:names:tc:SAML:2.0:cm:bearer"
STATUS_SUCCESS = "urn:oasis:names:tc:SAML:2.0:status:Success"

# saml-core 5.4.4: "Signatures in SAML messages SHOULD NOT contain transforms other than the enveloped
# signature transform ... or the exclusive canonicalization transforms". We refuse the rest (XPath,
# XSLT, base64): an IdP has no reason to use them and each one changes what "signed" means.
_ALLOWED_TRANSFORMS = frozenset(
    {"http://www.w3.org/2000/09/xmldsig#enveloped-signature"}
    | {m.value for m in CanonicalizationMethod}
)

# The attribute names signxml (and SAML) treat as IDs; their values must be unique in the document
# so that a Reference "#id" can name only one element.
_ID_ATTRIBUTE_NAMES = frozenset({"ID", "Id", "id"})

_DATETIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})?")
_BASE64_WHITESPACE = re.compile(r"[ \t\r\n]+")

# How much of an untrusted string an error description quotes: enough to recognise it, not the
# 256 KB an attacker can put in an Issuer.
_QUOTE_LIMIT = 200


@dataclass(frozen=True)
class SamlIdp:
    """A trusted SAML identity provider: its entity id and its signing certificates.

    Several certificates may be listed so that keys can roll over; a signature made with any one of
    them is accepted. `attributes` restricts which attributes become claims (by Name or
    FriendlyName); empty means all. Raises ValueError on construction when a certificate is not a
    PEM X.509 certificate, so a bad configuration is reported at start, not at the first assertion.
    """

    entity_id: str
    certificates: tuple[str, ...]
    attributes: tuple[str, ...] = ()
    name_id_as_sub: bool = True
    # When given, a bearer SubjectConfirmationData must name one of these as its Recipient.
    recipients: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.entity_id:
            raise ValueError("SAML identity provider: entity_id must not be empty")
        if not self.certificates:
            raise ValueError(f"SAML identity provider {self.entity_id}: no certificates")
        for index, pem in enumerate(self.certificates):
            try:
                x509.load_pem_x509_certificate(pem.encode())
            except ValueError as exc:
                raise ValueError(
                    f"SAML identity provider {self.entity_id}: certificate {index} is not a PEM "
                    f"X.509 certificate ({exc})"
                ) from exc


@dataclass(frozen=True)
class SamlSettings:
    """How this server checks assertions: the audience it answers to, size cap, clock skew, SHA-1."""

    audience: str
    max_bytes: int = 262144
    clock_skew: int = 120
    allow_sha1: bool = False

    def __post_init__(self) -> None:
        if not self.audience:
            raise ValueError("SAML settings: audience must not be empty")
        if self.max_bytes <= 0:
            raise ValueError("SAML settings: max_bytes must be positive")
        if self.clock_skew < 0:
            raise ValueError("SAML settings: clock_skew must not be negative")


@dataclass(frozen=True)
class VerifiedAssertion:
    """What a verified assertion says, read only from the signed XML.

    `expires_at` is the unix time until which `assertion_id` must be remembered (per `issuer`) to
    refuse replays. The assertion is accepted only while its Conditions hold and one of its bearer
    SubjectConfirmationData windows does: at the latest until the earlier of the Conditions
    NotOnOrAfter and the latest bearer NotOnOrAfter, plus the clock skew. `expires_at` is the latest
    of all these bounds plus the skew, which is never earlier, so no replay outlives the memory.
    `one_time` is True when the signed Conditions hold a OneTimeUse element.
    """

    assertion_id: str
    issuer: str
    expires_at: int
    attributes: dict[str, Any]
    one_time: bool
    # Whom it is about at its issuer: the NameID; an assertion without one is about a subject of
    # its own (named by its ID), so that it never combines with another.
    subject: str = ""


def _refuse(reason: str) -> ClaimsError:
    return ClaimsError(f"SAML assertion refused: {reason}")


def _quoted(untrusted: str) -> str:
    """An untrusted string for an error description: quoted, and cut short if it is long."""
    if len(untrusted) <= _QUOTE_LIMIT:
        return repr(untrusted)
    return f"{untrusted[:_QUOTE_LIMIT]!r}..."


def verify_assertion(
    unverified_b64: Any, idps: Sequence[SamlIdp], settings: SamlSettings, now: int
) -> VerifiedAssertion:
    """Verify a pushed SAML assertion (base64 text) and return what it asserts.

    Raises ClaimsError whose description names the check that failed.
    """
    document = _decode(unverified_b64, settings.max_bytes)
    root = _parse(document)
    if any(True for _ in root.iter(ENCRYPTED_ASSERTION)):
        raise _refuse("encrypted SAML assertions are not supported")
    signed_element = _check_shape(root)

    unverified_assertion = root if root.tag == ASSERTION else root.find("saml:Assertion", _NS)
    assert unverified_assertion is not None  # _check_shape found exactly one
    unverified_issuer = _issuer_of(unverified_assertion)
    if unverified_issuer is None:
        raise _refuse("the assertion has no Issuer (with the entity format)")
    idp = next((idp for idp in idps if idp.entity_id == unverified_issuer), None)
    if idp is None:
        raise _refuse(f"unknown identity provider {_quoted(unverified_issuer)}")

    signed = _verify_signatures(root, signed_element, idp, settings, now)

    # From here on, only the signed XML is read.
    if isinstance(signed, tuple):  # both signed: the Response's status, the Assertion's word
        signed_response, assertion = signed
        _check_response(signed_response, idp)
        held = signed_response.findall("saml:Assertion", _NS)
        if len(held) != 1 or held[0].get("ID") != assertion.get("ID"):
            raise _refuse("the signed Response does not hold the signed Assertion")
    elif signed.tag == ASSERTION:
        assertion = signed
        if root.tag == RESPONSE:
            _check_response(root, idp)  # unsigned, so it can only add refusals
    else:
        _check_response(signed, idp)
        assertions = signed.findall("saml:Assertion", _NS)
        if len(assertions) != 1:
            raise _refuse("the signed Response does not hold exactly one Assertion")
        assertion = assertions[0]
    return _read_assertion(assertion, idp, settings, now)


def assertion_claims(verified: VerifiedAssertion, client_id: str, gathered_at: int) -> list[Claim]:
    """The claims a verified assertion carries, issued by its identity provider."""
    return [
        Claim(
            type=SAML_TYPE,
            name=name,
            value=list(value) if isinstance(value, list) else value,
            issuer=verified.issuer,
            client_id=client_id,
            gathered_at=gathered_at,
            subject=verified.subject,
        )
        for name, value in verified.attributes.items()
    ]


def _decode(unverified_b64: Any, max_bytes: int) -> bytes:
    if not isinstance(unverified_b64, str):
        raise _refuse("saml_assertion must be a string (base64 of the XML document)")
    # Look at the length before doing any work on the string: base64 of max_bytes is
    # 4 * ceil(max_bytes / 3) characters; IdPs wrap lines, so allow generous room for whitespace.
    max_encoded = 4 * math.ceil(max_bytes / 3)
    if len(unverified_b64) > 2 * max_encoded + 1024:
        raise _refuse(f"the document is larger than {max_bytes} bytes")
    compact = _BASE64_WHITESPACE.sub("", unverified_b64)
    if len(compact) > max_encoded:
        raise _refuse(f"the document is larger than {max_bytes} bytes")
    if not compact.isascii():
        raise _refuse("saml_assertion is not valid base64")
    try:
        document = base64.b64decode(compact, validate=True)
    except binascii.Error as exc:
        raise _refuse("saml_assertion is not valid base64") from exc
    if len(document) > max_bytes:
        raise _refuse(f"the document is larger than {max_bytes} bytes")
    return document


def _parser() -> etree.XMLParser:
    # No entities, no network, no DTD, default size limits. Comments and processing instructions are
    # dropped while parsing, so adjacent text is merged and nothing reads half of a split value
    # ("user@evil.example<!---->.idp.example"); SAML signatures are made without comments.
    # A fresh parser per call, so none is ever shared between threads.
    return etree.XMLParser(
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        huge_tree=False,
        remove_comments=True,
        remove_pis=True,
    )


# The parse errors libxml2 reports for entities it will not expand: an undeclared or external one, a
# loop, and its entity amplification limit (the billion laughs), which it files as a resource limit,
# as it does its depth limit.
_ENTITY_ERRORS = frozenset(
    {
        etree.ErrorTypes.ERR_UNDECLARED_ENTITY,
        etree.ErrorTypes.ERR_ENTITY_IS_EXTERNAL,
        etree.ErrorTypes.ERR_ENTITY_LOOP,
        etree.ErrorTypes.ERR_RESOURCE_LIMIT,
    }
)


def _parse(document: bytes) -> etree._Element:
    # SAML messages never carry a DTD; a DOCTYPE is how entity expansion and external references get
    # in, so any is refused rather than interpreted. lxml is the first to read the document: its
    # settings keep a DTD inert (nothing loaded, no entity substituted), an entity bomb stops the
    # parser, and a DOCTYPE that parses is refused from the docinfo, whatever the encoding and
    # wherever else "<!DOCTYPE" appears as text (CDATA, comments).
    parser = _parser()
    try:
        root = etree.fromstring(document, parser=parser)
    except etree.XMLSyntaxError as exc:
        if any(error.type in _ENTITY_ERRORS for error in parser.error_log):
            raise _refuse(
                "the XML parser refused an entity or hit a resource limit "
                "(a DOCTYPE and entity declarations are not allowed)"
            ) from exc
        raise _refuse("the document is not well-formed XML") from exc
    docinfo = root.getroottree().docinfo
    if docinfo.doctype or docinfo.internalDTD is not None or docinfo.externalDTD is not None:
        raise _refuse("the document has a DOCTYPE (DTDs and entity declarations are not allowed)")
    if any(True for _ in root.iter(etree.Entity)):
        raise _refuse("the document uses entity references")
    return root


def _check_shape(root: etree._Element) -> etree._Element:
    """Check the document's structure and return the element the signature must sign (the
    Response when both it and its Assertion are signed; `_verify_signatures` checks both).

    Signature wrapping works by making the verifier check one element and the application read
    another. Each rule here leaves one fewer place for a second Assertion or a displaced signature.
    """
    if root.tag not in (ASSERTION, RESPONSE):
        raise _refuse("the document is neither a saml:Assertion nor a samlp:Response")

    assertions = list(root.iter(ASSERTION))
    if len(assertions) != 1:
        raise _refuse(f"the document must hold exactly one Assertion, it holds {len(assertions)}")
    assertion = assertions[0]
    if root.tag == RESPONSE and assertion.getparent() is not root:
        raise _refuse("the Assertion is not a direct child of the Response")

    seen_ids: set[str] = set()
    for element in root.iter(etree.Element):
        for name, value in element.attrib.items():
            if etree.QName(name).localname in _ID_ATTRIBUTE_NAMES:
                if value in seen_ids:
                    raise _refuse(f"the ID {_quoted(value)} appears more than once in the document")
                seen_ids.add(value)

    signatures = list(root.iter(SIGNATURE))
    if not signatures:
        raise _refuse("the document is not signed")
    # "Sign both" (Azure AD, ADFS, Okta): a Response signed, holding an Assertion signed too. Each
    # signature must then be a direct child of its own element and cover exactly that element.
    sign_both = (
        root.tag == RESPONSE
        and len(signatures) == 2
        and {signature.getparent() for signature in signatures} == {root, assertion}
    )
    if len(signatures) != 1 and not sign_both:
        raise _refuse(
            f"the document must hold exactly one Signature, it holds {len(signatures)} "
            "(the IdP signs the Response, the Assertion, or each of them once)"
        )
    signed_elements = [_check_signature(signature, root, assertion) for signature in signatures]
    return signed_elements[0] if len(signed_elements) == 1 else root


def _check_signature(
    signature: etree._Element, root: etree._Element, assertion: etree._Element
) -> etree._Element:
    """Check where one signature sits and what it names; return the element it must sign."""
    signed_element = signature.getparent()
    if signed_element is not assertion and signed_element is not root:
        raise _refuse("the Signature is not a direct child of the Assertion or the Response")

    element_id = signed_element.get("ID")
    if not element_id:
        raise _refuse(f"the signed {etree.QName(signed_element).localname} has no ID")
    # saml-core 5.4.2: "Signatures MUST contain a single <ds:Reference> containing a same-document
    # reference to the ID attribute value of the root element of the assertion or protocol message
    # being signed."
    references = signature.findall("ds:SignedInfo/ds:Reference", _NS)
    if len(references) != 1:
        raise _refuse(f"the signature must have exactly one Reference, it has {len(references)}")
    if references[0].get("URI") != f"#{element_id}":
        raise _refuse("the signature's Reference does not point to the element it is enveloped in")
    for transform in references[0].findall("ds:Transforms/ds:Transform", _NS):
        if transform.get("Algorithm") not in _ALLOWED_TRANSFORMS:
            raise _refuse("the signature uses a transform SAML does not allow")
    # An empty value is nothing to verify, and signxml fails on it with a TypeError.
    for part in ("SignatureValue", "SignedInfo/ds:Reference/ds:DigestValue"):
        value = signature.find(f"ds:{part}", _NS)
        if value is None or not (value.text or "").strip():
            raise _refuse(f"the signature's {part.rsplit(':', 1)[-1]} is missing or empty")
    return signed_element


def _is_sha1(algorithm: str | None) -> bool:
    return algorithm is not None and "sha1" in algorithm.lower()


def _signature_configuration(
    location: str, settings: SamlSettings, now: int
) -> SignatureConfiguration:
    signature_methods = frozenset(
        m
        for m in SignatureMethod
        if not m.name.startswith("HMAC_") and (settings.allow_sha1 or "SHA1" not in m.name)
    )
    digest_algorithms = frozenset(
        d for d in DigestAlgorithm if settings.allow_sha1 or "SHA1" not in d.name
    )
    return SignatureConfiguration(
        require_x509=True,
        location=location,
        expect_references=1,
        signature_methods=signature_methods,
        digest_algorithms=digest_algorithms,
        # Certificate validity is judged at the same instant as the assertion's conditions.
        verification_time=datetime.fromtimestamp(now, tz=UTC),
    )


# What signxml raises for a signature that does not verify. TypeError: signxml base64-decodes
# element texts without checking that there are any (an empty RSAKeyValue Modulus in KeyInfo).
_VERIFY_ERRORS = (SignXMLException, etree.LxmlError, ValueError, KeyError, TypeError)


def _verify_signatures(
    root: etree._Element,
    signed_element: etree._Element,
    idp: SamlIdp,
    settings: SamlSettings,
    now: int,
) -> etree._Element | tuple[etree._Element, etree._Element]:
    """Verify the signature of `signed_element`; return the signed XML (only it). When the
    Response and its Assertion are both signed, both must verify with one certificate of the IdP:
    the signed Response and the signed Assertion are returned."""
    assertion = root.find("saml:Assertion", _NS)
    both = (
        signed_element is root
        and assertion is not None
        and assertion.find("ds:Signature", _NS) is not None
    )
    if not both:
        return _verify_signature(root, signed_element, idp, settings, now)
    assert assertion is not None
    for certificate in idp.certificates:
        one = replace(idp, certificates=(certificate,))
        try:
            signed_response = _verify_signature(root, root, one, settings, now)
        except ClaimsError:
            continue  # another certificate may have made both (key rollover)
        return signed_response, _verify_signature(root, assertion, one, settings, now)
    # None verifies the Response: refuse as for any signature, naming why.
    _verify_signature(root, root, idp, settings, now)
    raise _refuse(f"signature does not verify against the certificates of {idp.entity_id}")


def _verify_signature(
    root: etree._Element,
    signed_element: etree._Element,
    idp: SamlIdp,
    settings: SamlSettings,
    now: int,
) -> etree._Element:
    """Verify the signature of `signed_element` with the IdP's certificates; return the signed XML
    (only it)."""
    signed_info = signed_element.find("ds:Signature/ds:SignedInfo", _NS)
    if signed_info is None:
        raise _refuse("the signature has no SignedInfo")
    algorithms = [
        element.get("Algorithm")
        for element in (
            signed_info.find("ds:SignatureMethod", _NS),
            *signed_info.findall("ds:Reference/ds:DigestMethod", _NS),
        )
        if element is not None
    ]
    if not settings.allow_sha1 and any(_is_sha1(a) for a in algorithms):
        raise _refuse("the signature uses SHA-1, which is not allowed")

    # signxml looks for the signature at exactly this place (relative to the root) and nowhere else.
    location = "./" if signed_element is root else f"./{{{SAML_NS}}}Assertion/"
    config = _signature_configuration(location, settings, now)
    out_of_validity = False
    for certificate in idp.certificates:
        try:
            result = _verify_with(root, certificate, config)
        except InvalidCertificate:
            # signxml judges the certificate's validity period before the signature. Only when the
            # signature is this certificate's does the refusal blame the period.
            valid_from = x509.load_pem_x509_certificate(certificate.encode()).not_valid_before_utc
            try:
                _verify_with(root, certificate, replace(config, verification_time=valid_from))
                out_of_validity = True
            except _VERIFY_ERRORS:
                pass
            continue
        except _VERIFY_ERRORS:
            continue  # the next certificate may be the one (key rollover)
        signed = result.signed_xml
        if (
            signed is None
            or signed.tag != signed_element.tag
            or signed.get("ID") != signed_element.get("ID")
        ):
            raise _refuse("the signed XML is not the element the signature is enveloped in")
        return signed
    if out_of_validity:
        at = datetime.fromtimestamp(now, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        raise _refuse(
            f"the signing certificate of {idp.entity_id} is not valid at {at} "
            "(expired or not yet valid)"
        )
    raise _refuse(f"signature does not verify against the certificates of {idp.entity_id}")


def _verify_with(
    root: etree._Element, certificate: str, config: SignatureConfiguration
) -> VerifyResult:
    result = XMLVerifier().verify(
        root, x509_cert=certificate, expect_config=config, parser=_parser(), id_attribute="ID"
    )
    # With expect_references=1, signxml returns the one result, not a list.
    assert isinstance(result, VerifyResult)
    return result


def _issuer_of(element: etree._Element) -> str | None:
    issuer = element.find("saml:Issuer", _NS)
    if issuer is None or issuer.text is None:
        return None
    # saml-core 2.2.5: the Format of an Issuer is omitted or the entity format.
    if issuer.get("Format") not in (None, ENTITY_NAMEID_FORMAT):
        return None
    return str(issuer.text).strip()


def _check_response(response: etree._Element, idp: SamlIdp) -> None:
    issuer = response.find("saml:Issuer", _NS)
    if issuer is not None and _issuer_of(response) != idp.entity_id:
        raise _refuse("the Response's Issuer is not the Assertion's identity provider")
    status = response.find("samlp:Status/samlp:StatusCode", _NS)
    if status is None or status.get("Value") != STATUS_SUCCESS:
        raise _refuse("the Response's status is not Success")


def _instant(element: etree._Element, attribute: str) -> float | None:
    value = element.get(attribute)
    if value is None:
        return None
    if not _DATETIME.fullmatch(value):
        raise _refuse(f"{attribute} is not an xs:dateTime")
    try:
        instant = datetime.fromisoformat(value)
    except ValueError as exc:
        raise _refuse(f"{attribute} is not an xs:dateTime") from exc
    if instant.tzinfo is None:
        # saml-core 1.3.3: "All SAML time values ... MUST be expressed in UTC form".
        instant = instant.replace(tzinfo=UTC)
    return instant.timestamp()


def _check_window(element: etree._Element, what: str, now: int, skew: int) -> float | None:
    """Check NotBefore/NotOnOrAfter of `element` against now (with skew); return NotOnOrAfter."""
    not_before = _instant(element, "NotBefore")
    not_on_or_after = _instant(element, "NotOnOrAfter")
    if not_before is not None and now + skew < not_before:
        raise _refuse(f"the assertion is not yet valid ({what} NotBefore)")
    if not_on_or_after is not None and now - skew >= not_on_or_after:
        raise _refuse(f"the assertion has expired ({what} NotOnOrAfter)")
    return not_on_or_after


def _read_assertion(
    assertion: etree._Element, idp: SamlIdp, settings: SamlSettings, now: int
) -> VerifiedAssertion:
    """Check the signed assertion's issuer, conditions and subject, and map its attributes."""
    if _issuer_of(assertion) != idp.entity_id:
        raise _refuse(f"the signed Issuer is not {idp.entity_id}")
    assertion_id = assertion.get("ID")
    if not assertion_id:
        raise _refuse("the assertion has no ID")
    if assertion.get("Version") != "2.0":
        raise _refuse("the assertion is not SAML 2.0")

    conditions = assertion.findall("saml:Conditions", _NS)
    if len(conditions) != 1:
        raise _refuse("the assertion has no Conditions with an AudienceRestriction")
    conditions_bound = _check_window(conditions[0], "Conditions", now, settings.clock_skew)
    _check_audience(conditions[0], settings.audience)

    bearer_bounds = _check_subject_confirmation(assertion, idp, now, settings.clock_skew)
    # Replay detection remembers an ID only until the assertion expires; one that never expires
    # could be replayed once it is forgotten. It expires when its Conditions do, or when every
    # bearer window has (see VerifiedAssertion).
    if conditions_bound is None and (not bearer_bounds or None in bearer_bounds):
        raise _refuse("the assertion has no NotOnOrAfter, so it would never expire")
    bounds = [b for b in (conditions_bound, *bearer_bounds) if b is not None]

    attributes = _attributes(assertion, idp)
    name_id = assertion.find("saml:Subject/saml:NameID", _NS)
    subject = f"(no NameID: assertion {assertion_id})"
    if name_id is not None and name_id.text and name_id.text.strip():
        subject = name_id.text.strip()
        if idp.name_id_as_sub:
            attributes["sub"] = subject
    return VerifiedAssertion(
        assertion_id=assertion_id,
        issuer=idp.entity_id,
        expires_at=math.ceil(max(bounds)) + settings.clock_skew,
        attributes=attributes,
        # saml-core 2.5.1.5: OneTimeUse "indicates that the assertion SHOULD be used immediately
        # by the relying party and MUST NOT be retained for future use".
        one_time=conditions[0].find("saml:OneTimeUse", _NS) is not None,
        subject=subject,
    )


def _check_subject_confirmation(
    assertion: etree._Element, idp: SamlIdp, now: int, skew: int
) -> list[float | None]:
    """Check that a bearer SubjectConfirmation holds; return every bearer NotOnOrAfter (or None).

    The client pushing the assertion proves nothing about the subject, so only bearer confirmations
    can be satisfied here: holder-of-key and sender-vouches need a proof this server never sees.
    An assertion without any SubjectConfirmation is accepted on its Conditions alone. When the
    provider's `recipients` are configured, a bearer confirmation holds only with one of them as
    its Recipient.
    """
    confirmations = assertion.findall("saml:Subject/saml:SubjectConfirmation", _NS)
    bearers = [c for c in confirmations if c.get("Method") == BEARER]
    if confirmations and not bearers:
        raise _refuse(
            "no bearer SubjectConfirmation (holder-of-key and sender-vouches are not supported)"
        )
    bounds: list[float | None] = []
    refusals: list[ClaimsError] = []
    for bearer in bearers:
        data = bearer.find("saml:SubjectConfirmationData", _NS)
        if data is None:
            bounds.append(None)
            if idp.recipients:
                refusals.append(_refuse("the bearer SubjectConfirmation names no Recipient"))
            continue
        # One that does not hold now may hold later: every bound counts for expires_at.
        bounds.append(_instant(data, "NotOnOrAfter"))
        try:
            _check_window(data, "bearer SubjectConfirmationData", now, skew)
            recipient = data.get("Recipient")
            if idp.recipients and recipient is None:
                raise _refuse("the bearer SubjectConfirmationData names no Recipient")
            if idp.recipients and recipient not in idp.recipients:
                raise _refuse(
                    f"the bearer SubjectConfirmationData's Recipient {_quoted(str(recipient))}"
                    " is not one of this server's recipients"
                )
        except ClaimsError as refused:
            refusals.append(refused)
    # saml-core 2.4.1: "If more than one subject confirmation is provided, then satisfying any one
    # of them is sufficient to confirm the subject for the purpose of applying the assertion."
    if bearers and len(refusals) == len(bearers):
        raise refusals[0]
    return bounds


def _check_audience(conditions: etree._Element, audience: str) -> None:
    restrictions = []
    for condition in conditions:
        if condition.tag == f"{{{SAML_NS}}}AudienceRestriction":
            restrictions.append(condition)
        elif condition.tag not in (f"{{{SAML_NS}}}OneTimeUse", f"{{{SAML_NS}}}ProxyRestriction"):
            # saml-core 2.5.1: a condition the relying party does not understand makes the
            # assertion's validity Indeterminate.
            raise _refuse(
                "the assertion has a condition this server does not understand "
                f"({_quoted(condition.tag)})"
            )
    if not restrictions:
        raise _refuse("the assertion has no AudienceRestriction")
    # saml-core 2.5.1.4: with several AudienceRestriction elements, each must be satisfied.
    for restriction in restrictions:
        audiences = [(a.text or "").strip() for a in restriction.findall("saml:Audience", _NS)]
        if audience not in audiences:
            raise _refuse(f"the assertion is not addressed to this server (audience {audience})")


def _attributes(assertion: etree._Element, idp: SamlIdp) -> dict[str, Any]:
    """Attribute values by Name, and by FriendlyName when it differs and names no other attribute."""
    by_name: dict[str, list[str]] = {}
    by_friendly_name: dict[str, list[str]] = {}
    wanted = set(idp.attributes)
    for attribute in assertion.findall("saml:AttributeStatement/saml:Attribute", _NS):
        name = attribute.get("Name")
        friendly_name = attribute.get("FriendlyName")
        if not name:
            continue
        if wanted and name not in wanted and friendly_name not in wanted:
            continue
        values = [
            value.text or ""
            for value in attribute.findall("saml:AttributeValue", _NS)
            # Complex values (child elements) and nil values are not claims we can compare.
            if len(value) == 0 and value.get(f"{{{XSI_NS}}}nil") not in ("true", "1")
        ]
        if not values:
            continue
        by_name.setdefault(name, []).extend(values)
        if friendly_name and friendly_name != name:
            by_friendly_name.setdefault(friendly_name, []).extend(values)
    for friendly_name, values in by_friendly_name.items():
        by_name.setdefault(friendly_name, values)
    return {name: values[0] if len(values) == 1 else values for name, values in by_name.items()}
