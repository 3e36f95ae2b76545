"""What agents use: workers and tasks (:mod:`.tasks`), the memory tool (:mod:`.memory_tool`), dreams and
their dreamers (:mod:`.dreams`), the steward's review (:mod:`.review`) and the memory section of a
profile's prompt (:mod:`.prompt`)."""
