module github.com/gnn-spmd/gnn-spmd

go 1.26

require (
	gonum.org/v1/gonum v0.17.0
	gonum.org/v1/hdf5 v0.0.0-20210714002203-8c5d23bc6946
)
