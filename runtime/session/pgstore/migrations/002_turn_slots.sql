-- A tenant's running turns, across workers: one row per slot taken, under
-- a lease its worker's heartbeat renews. A tenant with limit N runs at
-- most N turns whose slot lease is live; a dead worker's slots free when
-- their leases expire.
CREATE TABLE dsh_turn_slots (
    tenant      text NOT NULL,
    slot        integer NOT NULL CHECK (slot >= 0),
    owner       text NOT NULL,
    lease_until timestamptz NOT NULL,
    PRIMARY KEY (tenant, slot)
);
