# SPDX-License-Identifier: Apache-2.0
# Install rules: the layer libraries, public headers, data files (vendor profiles, shape sets),
# an exported CMake package (find_package(prism) -> prism::prism) and a pkg-config file.
include(CMakePackageConfigHelpers)

install(TARGETS prism prism_opencl prism_runtime prism_kernels prism_tuning_db prism_dispatch prism_io
  EXPORT prismTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/prism DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE ${PROJECT_SOURCE_DIR}/NOTICE DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/vendors DESTINATION ${PRISM_INSTALL_DATA_DIR} OPTIONAL)
if(EXISTS ${PROJECT_SOURCE_DIR}/tuning_db/shapes)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/tuning_db/shapes DESTINATION ${PRISM_INSTALL_DATA_DIR})
endif()

set(prism_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/prism)
install(EXPORT prismTargets NAMESPACE prism:: DESTINATION ${prism_cmake_dir})
if(BUILD_SHARED_LIBS)
  set(prism_static_libraries OFF)
else()
  set(prism_static_libraries ON)
endif()
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/prismConfig.cmake.in
  ${PROJECT_BINARY_DIR}/prismConfig.cmake INSTALL_DESTINATION ${prism_cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/prismConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/prismConfig.cmake ${PROJECT_BINARY_DIR}/prismConfigVersion.cmake
  DESTINATION ${prism_cmake_dir})

file(RELATIVE_PATH PRISM_PC_RELATIVE_PREFIX "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
string(REGEX REPLACE "/$" "" PRISM_PC_RELATIVE_PREFIX "${PRISM_PC_RELATIVE_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/prism.pc.in ${PROJECT_BINARY_DIR}/prism.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/prism.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
