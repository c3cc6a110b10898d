"""Real signed SAML 2.0 documents for tests, made with throwaway keys and signxml.

Nothing here is mocked: keys and self-signed certificates are generated per test session, assertions
are built as XML and signed with signxml the way an IdP signs them (enveloped signature, exclusive
canonicalization, RSA-SHA256), and attack variants are built by rearranging real signed documents.
"""

from __future__ import annotations

import base64
import datetime
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from lxml import etree
from signxml import DigestAlgorithm, SignatureMethod, XMLSigner

SAML_NS = "urn:oasis:names:tc:SAML:2.0:assertion"
SAMLP_NS = "urn:oasis:names:tc:SAML:2.0:protocol"
DS_NS = "http://www.w3.org/2000/09/xmldsig#"
XENC_NS = "http://www.w3.org/2001/04/xmlenc#"
NSMAP = {"saml": SAML_NS, "samlp": SAMLP_NS}
EXC_C14N = "http://www.w3.org/2001/10/xml-exc-c14n#"
BEARER = "urn:oasis:names:tc:SAML:2.0:cm:bearer"
HOLDER_OF_KEY = "urn:oasis:names:tc:SAML:2.0:cm:holder-of-key"
SENDER_VOUCHES = "urn:oasis:names:tc:SAML:2.0:cm:sender-vouches"

# A fixed "now" for the module tests. Certificates are valid from a year before it until ten years
# after the real clock, so both the module tests and the tests that use the real time verify.
NOW = 1_750_000_000
CERTIFICATES_VALID_UNTIL = int(time.time()) + 10 * 365 * 86400

DEFAULT_ATTRIBUTES: tuple[tuple[str, str | None, tuple[str, ...]], ...] = (
    ("urn:oid:0.9.2342.19200300.100.1.3", "mail", ("alice@example.org",)),
    ("urn:oid:1.3.6.1.4.1.5923.1.1.1.1", "eduPersonAffiliation", ("member", "staff")),
    ("department", None, ("research",)),
)


def s(tag: str) -> str:
    return f"{{{SAML_NS}}}{tag}"


def p(tag: str) -> str:
    return f"{{{SAMLP_NS}}}{tag}"


def instant(unix: int) -> str:
    return datetime.datetime.fromtimestamp(unix, tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_id() -> str:
    return "_" + uuid.uuid4().hex


@dataclass(frozen=True)
class IdpKey:
    """A throwaway RSA key and a self-signed certificate for it, both PEM."""

    private_key_pem: str
    certificate_pem: str


def make_idp_key(
    common_name: str = "Test IdP",
    *,
    not_before: int = NOW - 365 * 86400,
    not_after: int = CERTIFICATES_VALID_UNTIL,
) -> IdpKey:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(datetime.datetime.fromtimestamp(not_before, tz=datetime.UTC))
        .not_valid_after(datetime.datetime.fromtimestamp(not_after, tz=datetime.UTC))
        .sign(key, hashes.SHA256())
    )
    return IdpKey(
        private_key_pem=key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode(),
        certificate_pem=certificate.public_bytes(serialization.Encoding.PEM).decode(),
    )


def build_assertion(
    *,
    issuer: str,
    audience: str | Sequence[str] | None,
    now: int = NOW,
    assertion_id: str | None = None,
    not_before: int | None = NOW - 60,
    not_on_or_after: int | None = NOW + 300,
    subject_not_on_or_after: int | None = NOW + 120,
    subject_not_before: int | None = None,
    confirmation_method: str | None = BEARER,
    name_id: str | None = "alice",
    attributes: Sequence[tuple[str, str | None, Sequence[str]]] = DEFAULT_ATTRIBUTES,
) -> etree._Element:
    """An unsigned saml:Assertion; `audience=None` leaves out the AudienceRestriction and
    `confirmation_method=None` the SubjectConfirmation."""
    assertion = etree.Element(
        s("Assertion"),
        nsmap=NSMAP,
        ID=assertion_id or new_id(),
        Version="2.0",
        IssueInstant=instant(now),
    )
    etree.SubElement(assertion, s("Issuer")).text = issuer

    subject = etree.SubElement(assertion, s("Subject"))
    if name_id is not None:
        etree.SubElement(
            subject,
            s("NameID"),
            Format="urn:oasis:names:tc:SAML:2.0:nameid-format:persistent",
        ).text = name_id
    if confirmation_method is not None:
        add_subject_confirmation(
            assertion, confirmation_method, subject_not_before, subject_not_on_or_after
        )

    conditions = etree.SubElement(assertion, s("Conditions"))
    if not_before is not None:
        conditions.set("NotBefore", instant(not_before))
    if not_on_or_after is not None:
        conditions.set("NotOnOrAfter", instant(not_on_or_after))
    if audience is not None:
        restriction = etree.SubElement(conditions, s("AudienceRestriction"))
        for value in [audience] if isinstance(audience, str) else audience:
            etree.SubElement(restriction, s("Audience")).text = value

    statement = etree.SubElement(assertion, s("AuthnStatement"), AuthnInstant=instant(now))
    context = etree.SubElement(statement, s("AuthnContext"))
    etree.SubElement(
        context, s("AuthnContextClassRef")
    ).text = "urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport"

    if attributes:
        statement = etree.SubElement(assertion, s("AttributeStatement"))
        for name, friendly_name, values in attributes:
            attribute = etree.SubElement(
                statement,
                s("Attribute"),
                Name=name,
                NameFormat="urn:oasis:names:tc:SAML:2.0:attrname-format:uri",
            )
            if friendly_name is not None:
                attribute.set("FriendlyName", friendly_name)
            for value in values:
                etree.SubElement(attribute, s("AttributeValue")).text = value
    return assertion


def add_subject_confirmation(
    assertion: etree._Element, method: str, not_before: int | None, not_on_or_after: int | None
) -> None:
    """Append a SubjectConfirmation (with SubjectConfirmationData) to the assertion's Subject."""
    subject = assertion.find(s("Subject"))
    assert subject is not None
    confirmation = etree.SubElement(subject, s("SubjectConfirmation"), Method=method)
    data = etree.SubElement(confirmation, s("SubjectConfirmationData"))
    if not_before is not None:
        data.set("NotBefore", instant(not_before))
    if not_on_or_after is not None:
        data.set("NotOnOrAfter", instant(not_on_or_after))


def build_response(
    *assertions: etree._Element,
    issuer: str | None,
    response_id: str | None = None,
    now: int = NOW,
    status: str = "urn:oasis:names:tc:SAML:2.0:status:Success",
) -> etree._Element:
    """A samlp:Response holding the given assertions (moved into it), unsigned."""
    response = etree.Element(
        p("Response"),
        nsmap=NSMAP,
        ID=response_id or new_id(),
        Version="2.0",
        IssueInstant=instant(now),
    )
    if issuer is not None:
        etree.SubElement(response, s("Issuer")).text = issuer
    status_element = etree.SubElement(response, p("Status"))
    etree.SubElement(status_element, p("StatusCode"), Value=status)
    for assertion in assertions:
        response.append(assertion)
    return response


class _Sha1Signer(XMLSigner):
    """signxml refuses to sign with SHA-1; legacy IdPs still do, so tests need such signatures."""

    def check_deprecated_methods(self) -> None:
        pass


def sign(
    root: etree._Element,
    key: IdpKey,
    *,
    placeholder_in: etree._Element | None = None,
    signed_id: str | None = None,
    extra_reference_ids: Sequence[str] = (),
    sha1: bool = False,
) -> etree._Element:
    """Sign like an IdP: an enveloped signature placed after the Issuer of `placeholder_in`
    (default: the root), with one Reference to `#signed_id` (default: that element's ID), and one
    more per `extra_reference_ids` (for attacks).

    Returns the signed document's root (a new tree).
    """
    holder = root if placeholder_in is None else placeholder_in
    placeholder = etree.Element(f"{{{DS_NS}}}Signature", nsmap={"ds": DS_NS}, Id="placeholder")
    issuer = holder.find(s("Issuer"))
    if issuer is not None:
        issuer.addnext(placeholder)
    else:
        holder.insert(0, placeholder)
    reference = signed_id if signed_id is not None else holder.get("ID")
    signer: XMLSigner
    if sha1:
        signer = _Sha1Signer(
            signature_algorithm=SignatureMethod.RSA_SHA1,
            digest_algorithm=DigestAlgorithm.SHA1,
            c14n_algorithm=EXC_C14N,
        )
    else:
        signer = XMLSigner(c14n_algorithm=EXC_C14N)
    return signer.sign(
        root,
        key=key.private_key_pem,
        cert=key.certificate_pem,
        reference_uri=[f"#{reference}", *(f"#{extra}" for extra in extra_reference_ids)],
        id_attribute="ID",
    )


def signed_assertion(key: IdpKey, **kwargs: Any) -> etree._Element:
    return sign(build_assertion(**kwargs), key)


def to_b64(root: etree._Element) -> str:
    return base64.b64encode(etree.tostring(root)).decode()


def find(root: etree._Element, path: str) -> etree._Element:
    element = root.find(path, {"saml": SAML_NS, "samlp": SAMLP_NS, "ds": DS_NS})
    assert element is not None, path
    return element


def encrypted_response(issuer: str) -> etree._Element:
    """A Response carrying an EncryptedAssertion (the cipher text is filler: it is refused unread)."""
    response = build_response(issuer=issuer)
    encrypted = etree.SubElement(response, s("EncryptedAssertion"))
    data = etree.SubElement(
        encrypted, f"{{{XENC_NS}}}EncryptedData", nsmap={"xenc": XENC_NS}, Type=f"{XENC_NS}Element"
    )
    cipher = etree.SubElement(data, f"{{{XENC_NS}}}CipherData")
    etree.SubElement(cipher, f"{{{XENC_NS}}}CipherValue").text = base64.b64encode(
        b"\0" * 64
    ).decode()
    return response
