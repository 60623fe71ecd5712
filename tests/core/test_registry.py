"""Registry.temporary: an entry for one block, and the registry as it was afterwards."""
from __future__ import annotations

import pytest

from archsep.errors import ArchsepError
from archsep.registry import Registry


class A:
    pass


class B:
    pass


def test_a_temporary_entry_is_gone_afterwards_and_a_replaced_one_comes_back():
    reg: Registry = Registry("thing")
    reg.register("a")(A)
    with reg.temporary("b", B):
        assert reg.get("b") is B and reg.names() == ["a", "b"] and B.registry_name == "b"
    assert reg.names() == ["a"] and not hasattr(B, "registry_name")
    with pytest.raises(ArchsepError, match="'b'"):
        reg.get("b")
    with reg.temporary("a", B):  # replaced for the block
        assert reg.get("a") is B
    assert reg.get("a") is A and A.registry_name == "a"
    with reg.temporary("a"):  # removed for the block
        assert reg.known("a") is None
    assert reg.get("a") is A


def test_a_temporary_entry_is_restored_when_the_block_fails():
    reg: Registry = Registry("thing")
    with pytest.raises(RuntimeError), reg.temporary("b", B):
        raise RuntimeError
    assert reg.known("b") is None
