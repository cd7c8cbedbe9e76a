"""Resource ranking: objects ranked for a query of tags (Harvey, Ruthven and Carman 2010)."""
