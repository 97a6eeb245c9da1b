"""``blockwise.Spec``: a spec given as TOML text."""

from __future__ import annotations

__all__ = ["Spec"]


class Spec:
    """A spec given as TOML text, for every function that takes a spec.

    A ``str`` passed as ``spec`` is always the path of a spec file; TOML text is wrapped in a
    ``Spec`` instead, so that the two never mix::

        text = '[image]\\nsize = "64MiB"\\n[[partition]]\\nfs = "fat32"\\nsize = "fill"\\n'
        blockwise.build(blockwise.Spec.from_toml(text), "sd.img")

    The text is parsed (and errors raised as :class:`blockwise.SpecError` naming the key) when
    it is used. Relative ``contents``/``source`` paths resolve against the ``base_dir=`` of
    the call, else the current directory.
    """

    __slots__ = ("text",)

    text: str
    """The TOML text."""

    def __init__(self, text: str) -> None:
        if not isinstance(text, str):
            raise TypeError(f"Spec takes TOML text (str), not {type(text).__name__}")
        self.text = text

    @classmethod
    def from_toml(cls, text: str) -> Spec:
        """The spec in ``text``, TOML with the keys of a spec file."""
        return cls(text)

    def __repr__(self) -> str:
        first = self.text.strip().splitlines()[0] if self.text.strip() else ""
        return f"blockwise.Spec.from_toml({first!r}…)" if first else "blockwise.Spec.from_toml('')"
