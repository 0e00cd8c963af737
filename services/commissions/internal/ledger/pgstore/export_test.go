package pgstore

// ReserveSales is reserveSales, the grouped reservation, for the tests to
// drive with a group of their choice.
var ReserveSales = (*Store).reserveSales
