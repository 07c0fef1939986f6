"""Authentication against `doppio dev --secure` (DOPPIO_URL, DOPPIO_CA,
DOPPIO_CERT, DOPPIO_KEY, DOPPIO_ROOT_PASSWORD)."""

from __future__ import annotations

import pytest

import doppio

from conftest import env


def test_login_then_read_with_the_token_and_with_a_certificate() -> None:
    url, ca = env("DOPPIO_URL"), env("DOPPIO_CA")
    anonymous = doppio.Client(url, ca=ca, retry=0)
    with pytest.raises(doppio.Unauthenticated) as e:
        anonymous.cluster()
    assert e.value.status == 401
    with pytest.raises(doppio.Unauthenticated):
        anonymous.login("root", "wrong password")

    c = doppio.Client(url, ca=ca)
    session = c.login("root", env("DOPPIO_ROOT_PASSWORD"))
    assert session.token and session.expires
    c.put_database("sec", partitions=1)
    c.put_table("sec", "T", key=[{"name": "id", "type": "string"}], schema={"type": "record", "name": "T", "fields": [{"name": "v", "type": "long"}]})
    c.put("sec", "T", ["a"], {"v": 1})

    by_token = doppio.Client(url, ca=ca, token=session.token)
    assert by_token.get("sec", "T", ["a"]).body == {"v": 1}
    by_cert = doppio.Client(url, ca=ca, cert=(env("DOPPIO_CERT"), env("DOPPIO_KEY")))
    assert by_cert.get("sec", "T", ["a"]).body == {"v": 1}
    by_password = doppio.Client(url, ca=ca, basic_auth=("root", env("DOPPIO_ROOT_PASSWORD")))
    assert by_password.get("sec", "T", ["a"]).body == {"v": 1}
