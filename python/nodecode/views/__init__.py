"""What the person reads, made from the log: ``/context`` (``status``), the
context buffer's data (``context``), the chat transcript, the turn tree, and
notices."""
