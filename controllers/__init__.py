"""os-ken (Ryu API) controller applications that program P4 switches over P4Runtime."""
