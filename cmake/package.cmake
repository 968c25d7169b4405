# SPDX-License-Identifier: Apache-2.0
# A Debian package of everything `cmake --install` installs (libraries, headers, CMake and
# pkg-config files, the prism and prism-llm commands, vendor profiles and shape sets):
#   cpack -G DEB --config <build>/CPackConfig.cmake   (scripts/test-package.sh builds and tests it)
set(CPACK_PACKAGE_NAME prism)
set(CPACK_PACKAGE_VENDOR "The prism authors")
set(CPACK_PACKAGE_CONTACT "The prism authors <prism@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_GENERATOR DEB)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://localhost/prism")
# Run-time libraries from dpkg-shlibdeps; what building against the headers and the CMake package
# needs on top (OpenCL headers and loader, the C++ bindings) by name.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "ocl-icd-opencl-dev, opencl-headers, opencl-clhpp-headers")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "pocl-opencl-icd | opencl-icd")
# dpkg-shlibdeps must find prism's own libraries inside the package being built.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
include(CPack)
